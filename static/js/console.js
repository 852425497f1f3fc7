/*
 * MemHouse console: small progressive enhancements on top of htmx.
 *
 * Every page works without JavaScript (plain forms post and redirect). With htmx loaded
 * (static/js/htmx.min.js, vendored - see README.md beside this file), actions swap only
 * the affected row; this script adds:
 *   - focus management: after a swap, focus moves to the element marked data-focus in
 *     the new content (the outcome message or confirmation), so keyboard and screen-reader
 *     users are not left on a removed button;
 *   - "Select all shown" for bulk decisions in the curator queue;
 *   - a message in words when the server fails (5xx) or cannot be reached;
 *   - an invitation link's token (after '#') posted from the invitation page.
 */
(function () {
  "use strict";

  function flash(text) {
    var area = document.getElementById("flash");
    if (!area) return;
    var p = document.createElement("p");
    p.className = "flash flash-error";
    p.textContent = text;
    area.replaceChildren(p);
  }

  function wireSelectAll(root) {
    (root || document).querySelectorAll("[data-select-all]").forEach(function (box) {
      var wrap = box.closest("[data-select-all-wrap]");
      if (wrap) wrap.hidden = false;
      if (box.dataset.wired) return;
      box.dataset.wired = "1";
      box.addEventListener("change", function () {
        document.querySelectorAll('input.select-one[form="bulk-form"]').forEach(function (one) {
          one.checked = box.checked;
        });
      });
    });
  }

  // An invitation link carries its token after '#' (never sent to the server, so in no
  // access log): post it from the page, and drop it from the address bar and history.
  function openInvitation() {
    var form = document.getElementById("invitation-code-form");
    var code = window.location.hash.slice(1);
    if (!form || !code) return;
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    form.elements.token.value = decodeURIComponent(code);
    form.submit();
  }

  document.addEventListener("DOMContentLoaded", function () {
    wireSelectAll(document);
    openInvitation();
  });

  // htmx:load fires for every element htmx inserts (not for the initial page body).
  document.addEventListener("htmx:load", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    if (!elt || elt === document.body || !elt.querySelector) return;
    wireSelectAll(elt);
    var focus = elt.matches("[data-focus]") ? elt : elt.querySelector("[data-focus]");
    if (focus) focus.focus();
  });

  document.addEventListener("htmx:responseError", function (evt) {
    var status = evt.detail && evt.detail.xhr ? evt.detail.xhr.status : 0;
    flash("The server could not complete that (error " + status + "). Nothing was changed " +
      "by this request; please reload the page and try again.");
  });

  document.addEventListener("htmx:sendError", function () {
    flash("The server could not be reached. Check your connection and try again.");
  });
})();
