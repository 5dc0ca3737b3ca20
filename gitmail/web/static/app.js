// Live lists: when the server reports a new commit in this page's project,
// fetch the page again and swap in every element marked data-live.
// Drafts: what is typed into a form marked data-draft is kept in the
// browser's storage as it is typed, so neither a live swap nor a reload
// loses it; sending the form forgets it.
(function () {
  "use strict";
  var project = document.body.dataset.project;
  var badge = document.getElementById("live");
  var pending = null;
  var refreshes = 0;

  // -- drafts ----------------------------------------------------------------
  function draftKey(form) {
    return "gitmail-draft:" + window.location.pathname + ":" + (form.getAttribute("action") || "");
  }

  function fields(form) {
    return Array.prototype.filter.call(form.elements, function (el) {
      return el.name && el.type !== "hidden" && el.type !== "submit" && el.type !== "button";
    });
  }

  function storage() {
    try { return window.localStorage; } catch (e) { return null; }
  }

  function saveDraft(form) {
    var store = storage();
    if (!store) { return; }
    var values = {};
    var typed = false;
    fields(form).forEach(function (el) {
      var value = (el.type === "checkbox" || el.type === "radio") ? el.checked : el.value;
      values[el.name] = value;
      if (el.tagName === "TEXTAREA" && value) { typed = true; }
    });
    var holder = form.closest("details");
    values["\u0000open"] = holder ? holder.open : false;
    if (typed || (holder && holder.open)) {
      store.setItem(draftKey(form), JSON.stringify(values));
    } else {
      store.removeItem(draftKey(form));
    }
  }

  function restoreDrafts(root) {
    var store = storage();
    if (!store) { return; }
    root.querySelectorAll("form[data-draft]").forEach(function (form) {
      var raw = store.getItem(draftKey(form));
      if (!raw) { return; }
      var values;
      try { values = JSON.parse(raw); } catch (e) { return; }
      fields(form).forEach(function (el) {
        if (!(el.name in values)) { return; }
        if (el.type === "checkbox" || el.type === "radio") { el.checked = Boolean(values[el.name]); }
        else { el.value = values[el.name]; }
      });
      var holder = form.closest("details");
      if (holder && values["\u0000open"]) { holder.open = true; }
    });
  }

  function watchDrafts(root) {
    root.querySelectorAll("form[data-draft]").forEach(function (form) {
      if (form.dataset.watched) { return; }
      form.dataset.watched = "1";
      form.addEventListener("input", function () { saveDraft(form); });
      form.addEventListener("change", function () { saveDraft(form); });
      form.addEventListener("submit", function () {
        var store = storage();
        if (store) { store.removeItem(draftKey(form)); }
      });
      var holder = form.closest("details");
      if (holder) { holder.addEventListener("toggle", function () { saveDraft(form); }); }
    });
  }

  restoreDrafts(document);
  watchDrafts(document);

  // -- previews: the server renders the body with the thread's own sanitizer --
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-preview]") : null;
    if (!button) { return; }
    var form = button.form;
    var shown = form.querySelector(".preview");
    fetch(button.dataset.preview, { method: "POST", credentials: "same-origin", body: new FormData(form) })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        shown.innerHTML = html;
        shown.hidden = false;
      })
      .catch(function () { /* nothing shown */ });
  });

  // -- keyboard shortcuts (listed in the help dialog, opened with ?) ------------
  var help = document.getElementById("help");
  var opener = document.getElementById("help-open");
  if (opener && help && help.showModal) { opener.addEventListener("click", function () { help.showModal(); }); }
  var cursor = -1;
  var lastKey = "";

  function items() {
    var found = document.querySelectorAll("article.message");
    return found.length ? found : document.querySelectorAll("main table.list tbody tr");
  }

  function move(step) {
    var list = items();
    if (!list.length) { return; }
    cursor = Math.max(0, Math.min(list.length - 1, cursor + step));
    list.forEach(function (el) { el.classList.remove("current"); });
    var el = list[cursor];
    el.classList.add("current");
    if (!el.hasAttribute("tabindex")) { el.setAttribute("tabindex", "-1"); }
    el.focus();
    el.scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey || target.isContentEditable ||
        /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) { return; }
    var key = event.key;
    if (key === "?" && help && help.showModal) { event.preventDefault(); help.showModal(); }
    else if (key === "j") { move(1); }
    else if (key === "k") { move(-1); }
    else if (key === "/") {
      var search = document.querySelector("input[name=q]");
      event.preventDefault();
      if (search) { search.focus(); search.select(); }
      else if (project) { window.location.href = "/ui/p/" + project + "/search"; }
    } else if (key === "r") {
      var current = document.querySelector("article.message.current") || document.querySelector("article.message");
      var reply = current ? current.querySelector("details.reply") : null;
      if (reply) {
        event.preventDefault();
        reply.open = true;
        reply.querySelector("textarea").focus();
      }
    } else if (key === "d" && lastKey === "g") { window.location.href = project ? "/ui/p/" + project + "/dashboard" : "/ui/dashboard"; }
    lastKey = key;
  });

  // -- live refresh ----------------------------------------------------------
  function focusOf() {
    var el = document.activeElement;
    if (!el || !el.name || !el.form || !el.form.hasAttribute("data-draft")) { return null; }
    return { key: draftKey(el.form), name: el.name, start: el.selectionStart, end: el.selectionEnd };
  }

  function refocus(where) {
    if (!where) { return; }
    document.querySelectorAll("form[data-draft]").forEach(function (form) {
      if (draftKey(form) !== where.key) { return; }
      var el = form.elements.namedItem(where.name);
      if (!el || !el.focus) { return; }
      el.focus();
      if (typeof where.start === "number" && el.setSelectionRange) { el.setSelectionRange(where.start, where.end); }
    });
  }

  function refresh() {
    pending = null;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html");
        var where = focusOf();
        document.querySelectorAll("form[data-draft]").forEach(saveDraft);
        document.querySelectorAll("[data-live]").forEach(function (old) {
          var replacement = fresh.querySelector('[data-live="' + old.dataset.live + '"]');
          if (replacement && replacement.innerHTML !== old.innerHTML) {
            old.innerHTML = replacement.innerHTML;
            restoreDrafts(old);
            watchDrafts(old);
          }
        });
        refocus(where);
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
