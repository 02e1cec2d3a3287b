/* The API docs page (templates/api/swagger.html): django-ninja's Swagger set-up (CSRF token for
   the session's writes) plus the staff team picker, remembered in this browser, whose slug goes
   out as the X-Team header on every request Swagger makes. */
const body = document.querySelector("body");
const pageSettings = body.dataset;
const config = JSON.parse(document.getElementById("swagger-settings").textContent);
const teamPicker = document.getElementById("staff-team");
const TEAM_STORAGE_KEY = "memory-store:api-docs-team";

if (teamPicker) {
    const remembered = window.localStorage.getItem(TEAM_STORAGE_KEY) ?? teamPicker.dataset.initial;
    if (remembered && [...teamPicker.options].some((option) => option.value === remembered)) {
        teamPicker.value = remembered;
    }
    teamPicker.addEventListener("change", () => window.localStorage.setItem(TEAM_STORAGE_KEY, teamPicker.value));
}

config.dom_id = "#swagger-ui";
config.presets = [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset];
config.requestInterceptor = (request) => {
    if (pageSettings.apiCsrf && pageSettings.csrfToken) {
        request.headers["X-CSRFToken"] = pageSettings.csrfToken;
    }
    const sameOrigin = new URL(request.url, window.location.href).origin === window.location.origin;
    // A key given with "Authorize" answers for its own team: the picker's team beside it is refused.
    const keySent = Boolean(request.headers.Authorization);
    if (teamPicker && teamPicker.value && sameOrigin && !keySent && !request.headers[pageSettings.teamHeader]) {
        request.headers[pageSettings.teamHeader] = teamPicker.value;
    }
    return request;
};

window.ui = SwaggerUIBundle(config);
