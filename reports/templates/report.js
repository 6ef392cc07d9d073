// hybridprof report: collapse/expand subtrees, sort columns (siblings stay under their parent),
// filter by path, limit depth, and build op tables lazily from the embedded JSON (text only, never
// as markup, so hostile module or op names stay text).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("hp-data").textContent);
  var table = document.getElementById("layers");
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.querySelectorAll("tr.row"));
  var byPath = new Map();
  var details = new Map();
  var collapsed = new Set();
  var state = { filter: "", maxDepth: Infinity, sortCol: -1, sortDir: 1 };
  rows.forEach(function (row, i) { row.dataset.order = String(i); byPath.set(row.dataset.path, row); });
  // The report opens with the light subtrees collapsed (the server marks them; see open_depth).
  rows.forEach(function (row) {
    var button = row.querySelector("button.toggle");
    if (button && button.getAttribute("aria-expanded") === "false") { collapsed.add(row.dataset.path); }
  });

  function parentRow(row) {
    return row.hasAttribute("data-parent") ? byPath.get(row.dataset.parent) : undefined;
  }

  function underCollapsed(row) {
    for (var p = parentRow(row); p; p = parentRow(p)) {
      if (collapsed.has(p.dataset.path)) { return true; }
    }
    return false;
  }

  // A filter keeps the rows whose path contains the text, plus their ancestors (so the tree reads).
  function filterKeep() {
    if (!state.filter) { return null; }
    var keep = new Set();
    rows.forEach(function (row) {
      if (row.dataset.path.toLowerCase().indexOf(state.filter) < 0) { return; }
      for (var x = row; x && !keep.has(x); x = parentRow(x)) { keep.add(x); }
    });
    return keep;
  }

  function update() {
    var keep = filterKeep();
    var shown = 0;
    rows.forEach(function (row) {
      var visible = Number(row.dataset.depth) <= state.maxDepth &&
        (keep ? keep.has(row) : !underCollapsed(row));
      row.hidden = !visible;
      var detail = details.get(row);
      if (detail) { detail.hidden = !visible || detail.dataset.open !== "1"; }
      if (visible) { shown += 1; }
    });
    document.getElementById("shown").textContent = shown + " of " + rows.length + " rows";
  }

  function setCollapsed(row, yes) {
    var button = row.querySelector("button.toggle");
    if (!button) { return; }
    if (yes) { collapsed.add(row.dataset.path); } else { collapsed.delete(row.dataset.path); }
    button.setAttribute("aria-expanded", yes ? "false" : "true");
    button.textContent = yes ? "▸" : "▾";
  }

  function cellText(tag, text, cls) {
    var el = document.createElement(tag);
    el.textContent = text;
    if (cls) { el.className = cls; }
    return el;
  }

  function opTable(ops) {
    var heads = ["Op", "Calls", "Self CPU", "Total CPU"];
    if (data.device) { heads.push("Self device"); }
    if (data.memory) { heads.push("Self CPU mem"); }
    heads.push("Pass");
    var t = document.createElement("table");
    t.className = "ops-table";
    var hr = t.createTHead().insertRow();
    heads.forEach(function (h, i) { hr.appendChild(cellText("th", h, i > 0 && i < heads.length - 1 ? "num" : "")); });
    var body = t.createTBody();
    ops.forEach(function (o) {
      var tr = body.insertRow();
      var cells = [o[0], String(o[1]), o[2], o[3]];
      if (data.device) { cells.push(o[4]); }
      if (data.memory) { cells.push(o[5]); }
      cells.push(o[6] ? "backward" : "forward");
      cells.forEach(function (c, i) { tr.appendChild(cellText("td", c, i > 0 && i < cells.length - 1 ? "num" : "")); });
    });
    return t;
  }

  function toggleOps(row, button) {
    var detail = details.get(row);
    if (!detail) {
      detail = document.createElement("tr");
      detail.className = "detail";
      var td = detail.insertCell();
      td.colSpan = row.cells.length;
      td.appendChild(opTable(data.ops[row.dataset.path] || []));
      row.parentNode.insertBefore(detail, row.nextSibling);
      details.set(row, detail);
    }
    var open = detail.dataset.open !== "1";
    detail.dataset.open = open ? "1" : "0";
    detail.hidden = !open;
    button.setAttribute("aria-expanded", open ? "true" : "false");
  }

  function sortValue(row, col, type) {
    var cell = row.cells[col];
    if (type === "num") { return Number(cell.dataset.v || 0); }
    return cell.textContent.toLowerCase();
  }

  // Sort siblings under each parent, then lay the tree out again depth-first.
  function sortRows() {
    var th = table.tHead.rows[0].cells[state.sortCol];
    var type = th ? th.dataset.type : "tree";
    var kids = new Map();
    var roots = [];
    rows.forEach(function (row) {
      var p = parentRow(row);
      if (!p) { roots.push(row); return; }
      if (!kids.has(p)) { kids.set(p, []); }
      kids.get(p).push(row);
    });
    function compare(a, b) {
      if (type === "tree") { return Number(a.dataset.order) - Number(b.dataset.order); }
      var va = sortValue(a, state.sortCol, type);
      var vb = sortValue(b, state.sortCol, type);
      if (va === vb) { return Number(a.dataset.order) - Number(b.dataset.order); }  // stable ties
      return (va < vb ? -1 : 1) * state.sortDir;
    }
    var frag = document.createDocumentFragment();
    function place(row) {
      frag.appendChild(row);
      if (details.has(row)) { frag.appendChild(details.get(row)); }
      (kids.get(row) || []).sort(compare).forEach(place);
    }
    roots.sort(compare).forEach(place);
    tbody.appendChild(frag);
  }

  table.tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th.sortable");
    if (!th) { return; }
    var col = th.cellIndex;
    state.sortDir = state.sortCol === col ? -state.sortDir : (th.dataset.type === "num" ? -1 : 1);
    state.sortCol = col;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", state.sortDir > 0 ? "ascending" : "descending");
    sortRows();
  });

  tbody.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) { return; }
    var row = button.closest("tr");
    if (button.classList.contains("toggle")) {
      setCollapsed(row, !collapsed.has(row.dataset.path));
      update();
    } else if (button.classList.contains("ops")) {
      toggleOps(row, button);
    }
  });

  var filterTimer = 0;
  document.getElementById("filter").addEventListener("input", function (event) {
    window.clearTimeout(filterTimer);
    filterTimer = window.setTimeout(function () {
      state.filter = event.target.value.trim().toLowerCase();
      update();
    }, 120);
  });
  document.getElementById("depth").addEventListener("change", function (event) {
    state.maxDepth = event.target.value ? Number(event.target.value) : Infinity;
    update();
  });
  document.getElementById("expand-all").addEventListener("click", function () {
    rows.forEach(function (row) { setCollapsed(row, false); });
    update();
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    rows.forEach(function (row) { if (row.dataset.depth !== "0") { setCollapsed(row, true); } });
    update();
  });
  update();
}());
