// Switchyard dashboard — our own small script; every page works without it.
//
// - Countdowns: the server renders each with the time left when the page (or an htmx fragment)
//   was made; this ticks it down each second in between (format as views.FormatCountdown).
// - Stale state: when a page's live poll fails (the gateway is stopped or unreachable), a
//   banner says the state shown is stale and the countdowns stop; the next good poll ends both.
// - Times: <time data-local> elements, written by the server in UTC, are shown in the browser's
//   time zone and the page's language.
// - Copy buttons ([data-copy] names the element whose text is copied).
// - Focus: a control that had the keyboard focus keeps it when the part of the page it sits in
//   is refreshed (matched by id).
(function () {
  "use strict";

  var ends = new WeakMap(); // countdown element → performance.now() at which it reaches zero
  var stale = false;

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
      if (stale) return; // a stale page must not pretend time is passing on the server
      var left = end - now;
      var text = format(left, el.getAttribute("data-day-unit") || "d");
      if (el.textContent !== text) el.textContent = text;
      el.classList.toggle("countdown-done", left <= 0);
    });
  }

  var timeStyles = {
    minute: { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" },
    second: { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" },
    clock: { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" },
    hm: { hour: "2-digit", minute: "2-digit", hourCycle: "h23" },
    date: { year: "numeric", month: "2-digit", day: "2-digit", timeZone: "UTC" },
  };

  function localTimes() {
    var lang = document.documentElement.lang || undefined;
    document.querySelectorAll("time[data-local]:not([data-localized])").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      var opts = timeStyles[el.getAttribute("data-local")] || timeStyles.minute;
      if (isNaN(d.getTime())) return;
      try {
        el.textContent = new Intl.DateTimeFormat(lang, opts).format(d);
        el.title = d.toISOString();
        el.setAttribute("data-localized", "");
      } catch (e) {
        // keep the server's UTC text
      }
    });
  }

  function setStale(on) {
    if (stale === on) return;
    stale = on;
    document.documentElement.classList.toggle("stale", on);
    var banner = document.getElementById("stale-banner");
    if (banner) banner.hidden = !on;
    tick(); // a countdown's end stays where the server put it, so it resumes at the right time
  }

  function isPoll(evt) {
    var elt = evt.detail && evt.detail.elt;
    return elt && elt.hasAttribute && elt.hasAttribute("data-poll");
  }

  document.addEventListener("htmx:sendError", function (evt) { if (isPoll(evt)) setStale(true); });
  document.addEventListener("htmx:timeout", function (evt) { if (isPoll(evt)) setStale(true); });
  document.addEventListener("htmx:responseError", function (evt) {
    if (isPoll(evt) && evt.detail.xhr && evt.detail.xhr.status >= 500) setStale(true);
  });
  document.addEventListener("htmx:afterRequest", function (evt) {
    if (isPoll(evt) && evt.detail.successful) setStale(false);
  });

  // Focus: remember which control had it before a swap, give it back to its successor after.
  var focused = null;
  function remember() {
    var a = document.activeElement;
    if (a && a !== document.body && a.id) focused = a.id;
  }
  function restore() {
    if (!focused) return;
    var a = document.activeElement;
    if (!a || a === document.body || !document.contains(a)) {
      var el = document.getElementById(focused);
      if (el && typeof el.focus === "function") el.focus({ preventScroll: true });
    }
    focused = null;
  }
  document.addEventListener("htmx:beforeSwap", remember);
  document.addEventListener("htmx:oobBeforeSwap", remember);
  document.addEventListener("htmx:afterSettle", restore);
  document.addEventListener("htmx:oobAfterSwap", restore);

  document.addEventListener("click", function (evt) {
    var btn = evt.target.closest && evt.target.closest("button[data-copy]");
    if (!btn) return;
    var src = document.getElementById(btn.getAttribute("data-copy"));
    if (!src) return;
    var text = src.textContent.trim();
    var done = function () {
      var label = btn.getAttribute("data-copied");
      if (label) {
        if (!btn.hasAttribute("data-label")) btn.setAttribute("data-label", btn.textContent);
        btn.textContent = label;
        setTimeout(function () { btn.textContent = btn.getAttribute("data-label"); }, 2000);
      }
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { selectText(src); });
    } else {
      selectText(src);
      try {
        if (document.execCommand("copy")) done();
      } catch (e) {
        // the text stays selected for the reader to copy
      }
    }
  });

  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // Start new countdowns and local times at once (page load, htmx swaps), then keep the
  // countdowns current (the text changes once a second).
  function refresh() {
    tick();
    localTimes();
  }
  document.documentElement.classList.add("js");
  document.addEventListener("DOMContentLoaded", function () { refresh(); });
  document.addEventListener("htmx:afterSettle", refresh);
  document.addEventListener("htmx:oobAfterSwap", refresh);
  setInterval(tick, 250);
})();
