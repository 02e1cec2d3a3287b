from lessons.search.context import MAX_KEYWORDS, contextual_query, extract_keywords


def test_calls_quoted_strings_and_files_come_first():
    editor = 'sound("bd").fast(2).stack(note("c e g").slow(4))  // see patterns.ts'
    keywords = extract_keywords(editor)
    assert keywords[:5] == ["sound", "fast", "stack", "note", "slow"]
    assert "bd" in keywords and "c e g" in keywords and "patterns.ts" in keywords


def test_identifiers_without_stop_words_or_language_keywords():
    code = "const supabaseClient = createClient(url, key)\nif (session_token) { return await getUser() }"
    keywords = extract_keywords(code)
    assert {"createClient", "getUser", "supabaseClient", "session_token"} <= set(keywords)
    assert not {"const", "return", "await", "if"} & {k.lower() for k in keywords}


def test_at_most_ten_distinct_keywords():
    text = " ".join(f"function{i}()" for i in range(30)) + " function1() function1()"
    keywords = extract_keywords(text)
    assert len(keywords) == MAX_KEYWORDS
    assert len({k.lower() for k in keywords}) == len(keywords)
    assert keywords[0] == "function1"  # the most frequent call first


def test_nothing_to_extract():
    assert extract_keywords("") == []
    assert extract_keywords("   ") == []
    assert extract_keywords("the and of it is") == []


def test_contextual_query_appends_keywords():
    assert contextual_query(" add hi-hats ", ["bd", "sound"]) == "add hi-hats bd sound"


def test_a_word_longer_than_any_keyword_is_left_out():
    # pasted noise became one 50,000-letter keyword, and a contextual query far over the query limit
    noise = "x" * 50_000
    assert extract_keywords(f"retryPolicy {noise} backoff") == ["retryPolicy", "backoff"]
    assert extract_keywords(f"{'a' * 60} {'b' * 61}") == ["a" * 60]
