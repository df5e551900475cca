// The run page's live updates: server-sent events replace the live parts in place; the page
// reloads once when the run has ended (for its answer and diff). Relative times keep ticking.
(function () {
  "use strict";
  var root = document.querySelector("[data-events]");
  function rel(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 10) return "just now";
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return Math.floor(s / 86400) + " d ago";
  }
  function span(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-rel]").forEach(function (t) {
      t.textContent = rel(now - Date.parse(t.getAttribute("datetime")));
    });
    document.querySelectorAll("[data-since]").forEach(function (t) {
      t.textContent = span(now - Date.parse(t.getAttribute("data-since")));
    });
  }
  setInterval(tick, 5000);
  if (!root || !window.EventSource) return;
  var source = new EventSource(root.getAttribute("data-events"));
  source.addEventListener("update", function (event) {
    var data = JSON.parse(event.data);
    Object.keys(data.parts).forEach(function (id) {
      var part = document.getElementById(id);
      if (part) part.innerHTML = data.parts[id];
    });
    document.body.setAttribute("data-updates", String(1 + Number(document.body.getAttribute("data-updates") || 0)));
    if (data.ended) {
      source.close();
      setTimeout(function () { location.reload(); }, 800);
    }
  });
})();
