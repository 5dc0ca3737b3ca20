// Live lists: when the server reports a new commit in this page's project,
// fetch the page again and swap in every element marked data-live.
(function () {
  "use strict";
  var project = document.body.dataset.project;
  var badge = document.getElementById("live");
  var pending = null;
  var refreshes = 0;

  function refresh() {
    pending = null;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (old) {
          var replacement = fresh.querySelector('[data-live="' + old.dataset.live + '"]');
          if (replacement && replacement.innerHTML !== old.innerHTML) {
            old.innerHTML = replacement.innerHTML;
          }
        });
        refreshes += 1;
        document.body.dataset.refreshes = String(refreshes);
      })
      .catch(function () { /* the next change tries again */ });
  }

  if (!window.EventSource || !document.querySelector("[data-live]")) { return; }
  var source = new EventSource("/ui/events" + (project ? "?project=" + encodeURIComponent(project) : ""));
  source.addEventListener("open", function () { badge.classList.add("on"); document.body.dataset.live = "on"; });
  source.addEventListener("error", function () { badge.classList.remove("on"); });
  source.addEventListener("change", function () {
    if (pending === null) { pending = window.setTimeout(refresh, 150); }
  });
})();
