// Switchyard settings page: chips (add with the button or Enter, remove with ×, typed entries
// checked as statuses), loading a provider's overrides as soon as one is chosen, and Enter in the
// price look-up looking up. Every control works without this script too: chips are then
// checkboxes and an add input that takes a list, and a "Show" button loads the chosen provider.
// The script marks the document with class "js" first, so the JavaScript-only controls show and
// the no-JavaScript fallbacks hide without a flash; it listens on the document, so cards that
// htmx swaps in need nothing more.
document.documentElement.classList.add("js");
(function () {
  "use strict";

  function box(el) { return el.closest(".chips-field"); }
  function valid(kind, v) {
    return /^[1-5][0-9][0-9]$/.test(v) || (kind === "statuses" && /^[1-5]xx$/.test(v));
  }
  function addChips(f) {
    var input = f.querySelector(".chip-add"), list = f.querySelector(".chips");
    var proto = f.querySelector(".chip-template").content.firstElementChild;
    var bad = [];
    input.value.split(/[\s,;]+/).forEach(function (v) {
      v = v.trim().toLowerCase();
      if (!v) { return; }
      if (!valid(f.dataset.kind, v)) { bad.push(v); return; }
      if (list.querySelector('.code-chip[data-value="' + v + '"]')) { return; }
      var li = proto.cloneNode(true);
      li.dataset.value = v;
      li.querySelector("input").value = v;
      li.querySelector(".chip-text").textContent = v;
      var x = li.querySelector(".chip-x");
      x.setAttribute("aria-label", x.dataset.label.replace("%s", v));
      list.appendChild(li);
    });
    input.value = bad.join(", ");
    var err = f.parentElement.querySelector(".chip-error");
    if (bad.length) {
      err.textContent = f.dataset.invalid.replace("%s", bad.join(", "));
      err.hidden = false;
      input.setAttribute("aria-invalid", "true");
      input.focus();
    } else {
      err.hidden = true;
      err.textContent = "";
      input.removeAttribute("aria-invalid");
    }
  }
  document.addEventListener("click", function (e) {
    var x = e.target.closest && e.target.closest(".chip-x");
    if (x) {
      e.preventDefault();
      var f = box(x);
      x.closest(".code-chip").remove();
      if (f) { f.querySelector(".chip-add").focus(); }
      return;
    }
    var b = e.target.closest && e.target.closest(".chip-add-btn");
    if (b) {
      e.preventDefault();
      addChips(box(b));
    }
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && e.target.classList && e.target.classList.contains("chip-add")) {
      e.preventDefault();
      addChips(box(e.target));
      return;
    }
    // Enter in an input with data-enter presses that button (the price look-up) rather than
    // the card's save button.
    var sel = e.key === "Enter" && e.target.dataset && e.target.dataset.enter;
    if (sel && e.target.form) {
      var b = e.target.form.querySelector(sel);
      if (b) {
        e.preventDefault();
        b.click();
      }
    }
  });
  document.addEventListener("change", function (e) {
    var sel = e.target.dataset && e.target.dataset.load;
    // One load at a time: a second submit while htmx swaps the card would post the page.
    if (sel && e.target.form && !e.target.form.classList.contains("htmx-request")) {
      var b = e.target.form.querySelector(sel);
      if (b) { b.click(); }
    }
  });
})();
