// nsdiag report: sort the kernel table by a header click, filter its rows by a text box, follow
// a roofline point to its kernel.
(function () {
  "use strict";

  // A kernel's full name, or another long text the page repeats, is in it once (data-n: a
  // title, or its text); later mentions get it here, as a title (data-r) or as text (data-rt).
  var once = {};
  Array.prototype.forEach.call(document.querySelectorAll("[data-n]"), function (el) {
    once[el.getAttribute("data-n")] = el.getAttribute("title") || el.textContent;
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-r], [data-rt]"), function (el) {
    var title = once[el.getAttribute("data-r")];
    var text = once[el.getAttribute("data-rt")];
    if (title !== undefined) { el.setAttribute("title", title); }
    if (text !== undefined) { el.textContent = text; }
  });

  function cellKey(cell, numeric) {
    var raw = cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent;
    if (!numeric) { return raw.trim().toLowerCase(); }
    var value = parseFloat(raw);
    return isNaN(value) ? null : value;
  }

  function sortTable(table, th) {
    var column = th.cellIndex;
    var numeric = th.getAttribute("data-sort") === "num";
    var current = th.getAttribute("aria-sort");
    // Numbers sort largest first on the first click, text A to Z.
    var descending = current ? current === "ascending" : numeric;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keyed = rows.map(function (row, index) {
      return { row: row, key: cellKey(row.cells[column], numeric), index: index };
    });
    keyed.sort(function (a, b) {
      if (a.key === b.key) { return a.index - b.index; }
      if (a.key === null) { return 1; }        // missing values last, either direction
      if (b.key === null) { return -1; }
      var order = a.key < b.key ? -1 : 1;
      return descending ? -order : order;
    });
    var fragment = document.createDocumentFragment();
    keyed.forEach(function (item) { fragment.appendChild(item.row); });
    body.appendChild(fragment);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) { cell.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll("th[data-sort]"), function (th) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortTable(table, th); });
      th.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortTable(table, th); }
      });
    });
  });

  var filter = document.getElementById("kernel-filter");
  var table = document.getElementById("kernel-table");
  var count = document.getElementById("kernel-count");
  if (filter && table) {
    var texts = new WeakMap();
    var rowText = function (row) {
      if (!texts.has(row)) {
        var name = row.cells[1];
        texts.set(row, (row.textContent + " " + (name ? name.title : "")).toLowerCase());
      }
      return texts.get(row);
    };
    filter.addEventListener("input", function () {
      var terms = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      var rows = table.tBodies[0].rows;
      for (var i = 0; i < rows.length; i++) {
        var text = rowText(rows[i]);
        var match = terms.every(function (term) { return text.indexOf(term) !== -1; });
        rows[i].hidden = !match;
        if (match) { shown++; }
      }
      if (count) { count.textContent = shown + " of " + rows.length + " rows"; }
    });
  }

  // A click on a roofline point goes to its kernel's card, or to its table row when it has none.
  var roofline = document.getElementById("chart-roofline");
  if (roofline && roofline.on) {
    roofline.on("plotly_click", function (event) {
      var id = event.points && event.points.length ? event.points[0].customdata : null;
      if (id === null || id === undefined) { return; }
      if (document.getElementById("kernel-" + id)) {
        window.location.hash = "kernel-" + id;
        return;
      }
      var cell = document.querySelector('#kernel-table tbody td:first-child[data-v="' + Number(id) + '"]');
      if (cell) {
        var row = cell.parentNode;
        row.hidden = false;
        row.scrollIntoView({ block: "center" });
        row.classList.add("picked");
        setTimeout(function () { row.classList.remove("picked"); }, 2000);
      }
    });
  }

  // Dark mode follows the system while the page is open (the charts get the matching template);
  // paper is light.
  var scheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function chartsIn(dark) {
    var template = dark ? window.nsdiagPlot.dark : window.nsdiagPlot.light;
    if (template === window.nsdiagPlot.template) { return; }
    window.nsdiagPlot.template = template;
    Array.prototype.forEach.call(document.querySelectorAll(".js-plotly-plot"), function (plot) {
      window.Plotly.relayout(plot, { template: template });
    });
  }
  if (scheme && scheme.addEventListener && window.nsdiagPlot && window.Plotly) {
    scheme.addEventListener("change", function () { chartsIn(scheme.matches); });
    window.addEventListener("beforeprint", function () { chartsIn(false); });
    window.addEventListener("afterprint", function () { chartsIn(scheme.matches); });
  }

  // Plotly sizes charts inside closed <details> at zero width; resize them when they open.
  Array.prototype.forEach.call(document.querySelectorAll("details"), function (details) {
    details.addEventListener("toggle", function () {
      if (!details.open || !window.Plotly) { return; }
      Array.prototype.forEach.call(details.querySelectorAll(".js-plotly-plot"), function (plot) {
        window.Plotly.Plots.resize(plot);
      });
    });
  });
})();
