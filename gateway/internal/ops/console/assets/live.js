// Live updates of the escalations page. The page works without this file:
// it only re-reads the pending section (rendered and escaped by the server)
// when the event stream says escalations changed. It never builds HTML from
// data and never evaluates anything it receives.
"use strict";
(function () {
  var section = document.getElementById("pending");
  if (!section || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var url = section.getAttribute("data-live");
  if (url !== "/ui/escalations/pending") {
    return;
  }
  var busy = false, again = false;

  function state(text, on) {
    var el = document.getElementById("live-state");
    if (el) {
      el.textContent = text;
      el.className = on ? "live on" : "live";
    }
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(url, { credentials: "same-origin", cache: "no-store", redirect: "error" })
      .then(function (r) {
        if (!r.ok) { throw new Error("status " + r.status); }
        var type = r.headers.get("Content-Type") || "";
        if (type.indexOf("text/html") !== 0) { throw new Error("unexpected content"); }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString("<!doctype html><body>" + html, "text/html");
        var fresh = document.createDocumentFragment();
        var nodes = doc.body.childNodes;
        while (nodes.length) { fresh.appendChild(document.adoptNode(nodes[0])); }
        // Keep what the operator is typing into a form that is still there.
        var typed = {};
        section.querySelectorAll("form.decide").forEach(function (f) {
          var id = f.querySelector("input[name=id]"), reason = f.querySelector("input[name=reason]");
          if (id && reason && reason.value) { typed[id.value] = reason.value; }
        });
        section.replaceChildren(fresh);
        section.querySelectorAll("form.decide").forEach(function (f) {
          var id = f.querySelector("input[name=id]"), reason = f.querySelector("input[name=reason]");
          if (id && reason && typed[id.value]) { reason.value = typed[id.value]; }
        });
        state("live", true);
      })
      .catch(function () { state("reconnecting…", false); })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var es = new EventSource("/ui/events");
  es.addEventListener("open", function () { state("live", true); refresh(); });
  es.addEventListener("escalations", refresh);
  es.addEventListener("error", function () { state("reconnecting…", false); });
})();
