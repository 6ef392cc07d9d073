// hybridprof diff report: sort by a column header click, filter by text, show changed rows only.
(function () {
  "use strict";
  var table = document.getElementById("layers");
  var body = table.tBodies[0];
  var filter = document.getElementById("filter");
  var changedOnly = document.getElementById("changed-only");
  var direction = {};
  function apply() {
    var needle = filter.value.toLowerCase();
    Array.prototype.forEach.call(body.rows, function (row) {
      var quiet = row.classList.contains("v-within-noise");
      var hit = row.getAttribute("data-search").indexOf(needle) !== -1;
      row.style.display = hit && !(changedOnly.checked && quiet) ? "" : "none";
    });
  }
  filter.addEventListener("input", apply);
  changedOnly.addEventListener("change", apply);
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
    th.addEventListener("click", function () {
      var numeric = th.getAttribute("data-type") === "num";
      var sign = direction[index] = -(direction[index] || -1);  // first click: biggest first
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[index].getAttribute("data-sort");
        var y = b.cells[index].getAttribute("data-sort");
        if (numeric) { return sign * (Math.abs(parseFloat(y)) - Math.abs(parseFloat(x))); }
        return sign * x.localeCompare(y);
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
})();
