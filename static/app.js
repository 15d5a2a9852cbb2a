// Switchyard dashboard — our own small script. The server renders every countdown with the time
// left when the page (or an htmx fragment) was made; this only ticks it down each second in
// between. Without JavaScript the countdown stands still and the next page load shows the new
// state. The clock format matches views.FormatCountdown.
(function () {
  "use strict";

  var ends = new WeakMap(); // countdown element → performance.now() at which it reaches zero

  function pad(n) {
    return n < 10 ? "0" + n : String(n);
  }

  function format(ms, dayUnit) {
    var s = Math.max(Math.ceil(ms / 1000), 0);
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (d > 0) return d + " " + dayUnit + " " + pad(h) + ":" + pad(m) + ":" + pad(sec);
    if (h > 0) return h + ":" + pad(m) + ":" + pad(sec);
    return m + ":" + pad(sec);
  }

  function tick() {
    var now = performance.now();
    document.querySelectorAll("[data-countdown-ms]").forEach(function (el) {
      var end = ends.get(el);
      if (end === undefined) {
        end = now + Number(el.getAttribute("data-countdown-ms"));
        ends.set(el, end);
      }
      var left = end - now;
      var text = format(left, el.getAttribute("data-day-unit") || "d");
      if (el.textContent !== text) el.textContent = text;
      el.classList.toggle("countdown-done", left <= 0);
    });
  }

  // Start new countdowns at once (page load, htmx swaps), then keep them current (the text changes once a second).
  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  document.addEventListener("htmx:oobAfterSwap", tick);
  setInterval(tick, 250);
})();
