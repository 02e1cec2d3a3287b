"""Texts as the store keeps and reads them, alike on the way in (services, imports) and in a query.

One Unicode form (NFC): macOS keyboards send "crème" with a combining accent, and stored as sent
a search or a filter typed the other way missed it. No invisible characters: a zero-width space,
a word joiner or a stray byte-order mark pasted into a word ("pass\u200bword") hid it from every
word search. A text in which nothing shows (spaces, controls, format characters such as a lone
zero-width joiner or a soft hyphen) counts as blank: it was stored as an invisible title.
"""

import re
import unicodedata

# removed wherever they stand; zero-width joiners stay inside a text (emoji and some scripts need them)
INVISIBLE = dict.fromkeys(map(ord, "\u200b\u2060\ufeff"))
# trimmed with the spaces: a (non-)joiner at either end joins nothing ("Title\u200d" kept it, unseen)
_EDGES = re.compile(r"^[\s\u200c\u200d]+|[\s\u200c\u200d]+$")


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Chinese, Japanese
# kana): a "whole word" there is a whole run of text, so a word of them is matched as a substring.
UNSPACED_SCRIPTS = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]"
)


def whole_word_pattern(word: str) -> str:
    """A PostgreSQL regular expression for `word` with no letter, digit or underscore touching it
    ("Tom" is not "tomorrow", "art" not "heart"; "J.R." ends at its dot)."""
    return r"(?<![[:alnum:]_])" + re.escape(word) + r"(?![[:alnum:]_])"


def name_in_text_pattern(name: str) -> str:
    """A case-sensitive PostgreSQL regular expression for `name` written as a name in running text:
    a whole word (whole_word_pattern) whose first letter is a capital, the rest in any case ("Jazz"
    is not "jazz", "Nobody" not "nobody seemed to care"; "tom" finds "Tom" and "TOM"). A first
    character without case (a digit, Chinese) is matched as it is. The cases are alternatives,
    `(?:Æ|æ)`, not a bracket: PostgreSQL's unaccent() folds a pattern into `(?:AE|ae)`, where it
    folded `[Ææ]` into `[AEae]`, one letter."""
    def either(forms: set[str]) -> str:
        return "(?:" + "|".join(re.escape(form) for form in sorted(forms)) + ")"

    def either_case(character: str) -> str:
        forms = {character.lower(), character.upper()}
        if len(forms) == 2 and all(len(form) == 1 for form in forms):
            return either(forms)
        return re.escape(character)

    first, rest = name[:1], name[1:]
    capitals = {first.upper(), first.title()}
    head = either(capitals) if all(len(c) == 1 for c in capitals) else re.escape(first)
    return r"(?<![[:alnum:]_])" + head + "".join(either_case(c) for c in rest) + r"(?![[:alnum:]_])"


def is_visible(text: str) -> bool:
    """Whether any character of `text` shows: not only separators (Z*) and controls or format
    characters (C*)."""
    return any(unicodedata.category(character)[0] not in "CZ" for character in text)


def clean_text(value) -> str:
    """NFC, without invisible characters, trimmed; "" when nothing in it shows. The invisible
    characters go first: removed after NFC, a zero-width space between "e" and a combining accent
    left them apart ("Cafe\u0301"), and cleaning the stored text again gave another text ("Café")."""
    text = _EDGES.sub("", unicodedata.normalize("NFC", str(value).translate(INVISIBLE)))
    return text if is_visible(text) else ""


def clean_name(value) -> str:
    """A person's name: a clean text with its inner spaces collapsed; "" when it has no letter or
    digit (a stray "," from a comma-separated habit is not a person)."""
    name = " ".join(clean_text(value).split())
    return name if any(character.isalnum() for character in name) else ""


# The accents Latin, Greek and Cyrillic letters take (Combining Diacritical Marks): only these go
# from a name's key. Marks elsewhere are letters' own (Japanese dakuten: ガク is not カク; Devanagari vowel signs).
_ACCENTS = re.compile("[\u0300-\u036f]")


def name_key(name: str) -> str:
    """How two spellings of a clean name are compared, as the friends listing and the people filters
    compare them (lessons_folded_name, migration 0033): in any case, in the compatibility form, without
    accents ("Zoë" is zoe, "Ｓａｍ" sam). "İ": Python lowers it to "i" and a combining dot, PostgreSQL
    to "i"; the dot is an accent here. unaccent() also folds a few letters decomposition keeps ("ø",
    "æ"): such names stay two spellings here and one person in the listings."""
    return _ACCENTS.sub("", unicodedata.normalize("NFKD", name.casefold()))


def name_says_more(name: str) -> tuple[bool, bool, bool]:
    """Of two spellings of one name (name_key), the one to keep is the greater: in the compatibility
    form ("Sam" over "Ｓａｍ"), then with a capital ("Sam" over "sam"), then with its accents ("Zoë" over
    "Zoe"), as the friends listing picks a spelling on a tie."""
    return (unicodedata.is_normalized("NFKC", name), name != name.lower(),
            _ACCENTS.search(unicodedata.normalize("NFD", name)) is not None)


def clean_identifier(value) -> str | None:
    """An external id as given (no Unicode form imposed: it is matched against its source), without
    invisible characters and trimmed; None when nothing in it shows."""
    if value is None:
        return None
    identifier = str(value).translate(INVISIBLE).strip()
    return identifier if is_visible(identifier) else None
