// Keeps the user's environment cards current: phase, progress in plain
// words, the latest event and which buttons apply. Everything works
// without it; it only saves reloading the page.
(function () {
  "use strict";
  var list = document.querySelector("[data-status]");
  if (!list) { return; }
  function field(card, name) { return card.querySelector('[data-field="' + name + '"]'); }
  var title = document.title;
  function update(entries) {
    var warned = false;
    entries.forEach(function (e) {
      var card = list.querySelector('.env[data-namespace="' + e.namespace + '"][data-name="' + e.name + '"]');
      if (!card) { return; }
      var phase = field(card, "phase");
      if (phase.textContent !== e.phase) {
        phase.textContent = e.phase;
        phase.className = "phase phase-" + e.phase;
      }
      field(card, "message").textContent = e.message || "";
      field(card, "event").textContent = e.event ? "Latest: " + e.event : "";
      field(card, "lastActivity").textContent = e.lastActivity;
      // An idle stop is near: the notice, and the tab's title, say so
      // until someone uses the environment or presses Keep running.
      field(card, "idleWarning").hidden = !e.idleStop;
      field(card, "idleStop").textContent = e.idleStop || "";
      warned = warned || !!e.idleStop;
      card.querySelector('[data-role="start"]').hidden = e.running;
      card.querySelector('[data-role="stop"]').hidden = !e.running;
      card.querySelector('[data-role="apply"]').hidden = !e.updatePending;
    });
    document.title = warned ? "(stopping soon) " + title : title;
  }
  function poll() {
    fetch(list.getAttribute("data-status"), { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : []; })
      .then(update)
      .catch(function () {})
      .finally(function () { setTimeout(poll, 2000); });
  }
  poll();
})();
