// hybridprof report: the layer table, drawn from the embedded JSON. Collapse/expand subtrees, sort
// columns (siblings stay under their parent), filter by path, limit depth, open op tables.
//
// Only the rows on screen exist in the page (plus a margin): a model of 16,000 layers would
// otherwise ask the browser to lay out 16,000 rows on every click. The table has fixed row heights
// and column widths, so where a row sits is arithmetic; two spacer rows stand for the rows above
// and below. Every name is set as text (textContent), never as markup.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("hp-data").textContent);
  var table = document.getElementById("layers");
  var tbody = table.tBodies[0];
  var columns = data.table.columns;
  var rows = data.table.rows;
  var n = rows.length;
  // A row: [path, parent index, depth, flags, heat, op count, [cell texts], [sort values]].
  var PATH = 0, PARENT = 1, DEPTH = 2, FLAGS = 3, HEAT = 4, OPS = 5, TEXT = 6, VALUE = 7;
  var HAS_CHILDREN = 1, COLLAPSED = 2, UNPROFILED = 4, DERIVED = 8, OUTSIDE = 16;
  var MARGIN = 40;  // rows drawn above and below the screen, so a short scroll draws nothing
  var ncols = columns.length + 1;  // + the Ops column
  var valueIndex = [];  // column -> its index in a row's sort values (-1: not a number column)
  columns.reduce(function (k, c, i) { valueIndex[i] = c.sort === "num" ? k : -1; return c.sort === "num" ? k + 1 : k; }, 0);

  var collapsed = new Uint8Array(n);
  var opsOpen = new Uint8Array(n);
  var order = new Int32Array(n);  // the rows in display order (depth-first, siblings sorted)
  var lowerPaths = null;  // made on the first filter
  var state = { filter: "", maxDepth: Infinity, sortCol: -1, sortDir: 1 };
  // The report opens with the light subtrees collapsed (the server marks them; see open_depth).
  for (var i = 0; i < n; i++) { order[i] = i; collapsed[i] = rows[i][FLAGS] & COLLAPSED ? 1 : 0; }

  var items = [];  // what the table shows, in order: row index i, or ~i for row i's op table
  var tops = new Float64Array(1);  // tops[k]: where item k starts (px from the table body's top)
  var rowHeight = 22;  // measured once the first row is drawn
  var opHeights = new Map();  // row index -> measured height of its op table
  var drawn = { first: 0, last: 0 };
  var drawAll = false;  // printing: every visible row, no spacers

  function childrenOf() {
    var kids = [];
    var roots = [];
    for (var i = 0; i < n; i++) {
      var p = rows[i][PARENT];
      if (p < 0) { roots.push(i); } else { (kids[p] = kids[p] || []).push(i); }
    }
    return { kids: kids, roots: roots };
  }
  var tree = childrenOf();

  // A filter keeps the rows whose path contains the text, plus their ancestors (so the tree reads).
  function filterKeep() {
    if (!state.filter) { return null; }
    if (!lowerPaths) { lowerPaths = rows.map(function (r) { return r[PATH].toLowerCase(); }); }
    var keep = new Uint8Array(n);
    for (var i = 0; i < n; i++) {
      if (lowerPaths[i].indexOf(state.filter) < 0) { continue; }
      for (var x = i; x >= 0 && !keep[x]; x = rows[x][PARENT]) { keep[x] = 1; }
    }
    return keep;
  }

  function visibleRows() {
    var keep = filterKeep();
    var shown = [];
    var skipBelow = Infinity;  // inside a collapsed row's subtree: rows deeper than this hide
    for (var k = 0; k < n; k++) {
      var i = order[k];
      var depth = rows[i][DEPTH];
      if (keep) {
        if (keep[i] && depth <= state.maxDepth) { shown.push(i); }
        continue;
      }
      if (depth > skipBelow) { continue; }
      skipBelow = Infinity;
      if (depth > state.maxDepth) { continue; }
      shown.push(i);
      if (collapsed[i] && (rows[i][FLAGS] & HAS_CHILDREN)) { skipBelow = depth; }
    }
    return shown;
  }

  function opHeight(i) {
    return opHeights.has(i) ? opHeights.get(i) : (rows[i][OPS] + 1) * rowHeight + 16;
  }

  function measure() {
    items = [];
    var shown = visibleRows();
    shown.forEach(function (i) { items.push(i); if (opsOpen[i]) { items.push(~i); } });
    tops = new Float64Array(items.length + 1);
    for (var k = 0; k < items.length; k++) {
      tops[k + 1] = tops[k] + (items[k] >= 0 ? rowHeight : opHeight(~items[k]));
    }
    document.getElementById("shown").textContent = shown.length + " of " + n + " rows";
  }

  // The first item whose bottom is below y.
  function itemAt(y) {
    var lo = 0, hi = items.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (tops[mid + 1] <= y) { lo = mid + 1; } else { hi = mid; }
    }
    return lo;
  }

  // What shows of the table: the part of its scroll box that is inside the window (the box
  // scrolls the table both ways; the window scrolls the box into view).
  var scroller = document.getElementById("layers-scroll");
  function screenRange() {
    if (drawAll) { return { first: 0, last: items.length }; }
    var box = scroller.getBoundingClientRect();
    var body = tbody.getBoundingClientRect().top;
    var top = Math.max(box.top, 0) - body;
    var bottom = Math.min(box.bottom, window.innerHeight) - body;
    return { first: itemAt(Math.max(0, top)), last: Math.min(items.length, itemAt(Math.max(0, bottom)) + 1) };
  }

  function spacer(height) {
    var tr = document.createElement("tr");
    tr.className = "spacer";
    var td = tr.insertCell();
    td.colSpan = ncols;
    td.style.height = height + "px";
    return tr;
  }

  function cellText(tag, text, cls) {
    var el = document.createElement(tag);
    el.textContent = text;
    if (cls) { el.className = cls; }
    return el;
  }

  function rowElement(i) {
    var r = rows[i];
    var flags = r[FLAGS];
    var tr = document.createElement("tr");
    tr.className = "row heat" + r[HEAT] + (flags & UNPROFILED ? " unprofiled" : "") +
      (flags & DERIVED ? " derived" : "") + (flags & OUTSIDE ? " outside" : "");
    tr.dataset.path = r[PATH];
    tr.dataset.i = String(i);
    if (r[PARENT] >= 0) { tr.dataset.parent = rows[r[PARENT]][PATH]; }
    tr.dataset.depth = String(r[DEPTH]);
    columns.forEach(function (c, col) {
      var text = r[TEXT][col];
      var td = document.createElement("td");
      td.className = col === 0 ? "name d" + Math.min(r[DEPTH], 12) : c.css;
      if (col === 0) {
        if (flags & HAS_CHILDREN) {
          var open = !collapsed[i];
          var button = cellText("button", open ? "▾" : "▸", "toggle");
          button.type = "button";
          button.setAttribute("aria-expanded", open ? "true" : "false");
          button.title = "Collapse or expand this subtree";
          td.appendChild(button);
        }
        var label = cellText("span", text, "label");
        label.title = (r[PATH] || text) + (flags & DERIVED ? " (never runs itself: its children's total)" : "");
        td.appendChild(label);
      } else if (c.css === "num pct" && text) {
        var bar = document.createElement("span");
        bar.className = "heatbar";
        bar.style.width = Math.min(r[VALUE][valueIndex[col]], 100).toFixed(1) + "%";
        td.appendChild(bar);
        td.appendChild(cellText("span", text, "v"));
      } else {
        td.textContent = text;
      }
      tr.appendChild(td);
    });
    var opsCell = tr.insertCell();
    if (r[OPS]) {
      var ops = cellText("button", r[OPS] + (r[OPS] === 1 ? " op" : " ops"), "ops");
      ops.type = "button";
      ops.setAttribute("aria-expanded", opsOpen[i] ? "true" : "false");
      opsCell.appendChild(ops);
    }
    return tr;
  }

  // The op breakdowns are a second data block, parsed on the first op table opened (most opens
  // never need them).
  var allOps = null;
  function opsOf(i) {
    if (!allOps) { allOps = JSON.parse(document.getElementById("hp-ops").textContent); }
    return allOps[rows[i][PATH]] || [];
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

  function detailElement(i) {
    var tr = document.createElement("tr");
    tr.className = "detail";
    tr.dataset.i = String(i);
    var td = tr.insertCell();
    td.colSpan = ncols;
    td.appendChild(opTable(opsOf(i)));
    return tr;
  }

  // Draw the items on screen (and MARGIN around them); then correct the heights it guessed (the
  // first row's, an op table's) and draw again if one was off.
  function draw(force, corrected) {
    var want = screenRange();
    if (!force && want.first >= drawn.first && want.last <= drawn.last) { return; }
    var first = Math.max(0, want.first - MARGIN);
    var last = drawAll ? items.length : Math.min(items.length, want.last + MARGIN);
    var frag = document.createDocumentFragment();
    frag.appendChild(spacer(tops[first]));
    for (var k = first; k < last; k++) {
      frag.appendChild(items[k] >= 0 ? rowElement(items[k]) : detailElement(~items[k]));
    }
    frag.appendChild(spacer(tops[items.length] - tops[last]));
    tbody.replaceChildren(frag);
    drawn = { first: first, last: last };
    if (!corrected && correctHeights()) { measure(); draw(true, true); }
  }

  function correctHeights() {
    var wrong = false;
    var row = tbody.querySelector("tr.row");
    var h = row ? row.getBoundingClientRect().height : rowHeight;
    if (Math.abs(h - rowHeight) > 0.5) { rowHeight = h; wrong = true; }
    Array.prototype.forEach.call(tbody.querySelectorAll("tr.detail"), function (tr) {
      var h = tr.getBoundingClientRect().height;
      if (Math.abs(h - opHeight(Number(tr.dataset.i))) > 0.5) {
        opHeights.set(Number(tr.dataset.i), h);
        wrong = true;
      }
    });
    return wrong;
  }

  function update() { measure(); draw(true); }

  // Column widths from the longest text each column holds (fixed, so scrolling never moves them).
  function setWidths() {
    var probe = document.createElement("canvas").getContext("2d");
    var style = window.getComputedStyle(table);
    probe.font = style.fontWeight + " " + style.fontSize + " " + style.fontFamily;
    var em = parseFloat(style.fontSize);
    var colgroup = document.createElement("colgroup");
    var total = 0;
    function add(px) {
      var col = document.createElement("col");
      col.style.width = Math.ceil(px) + "px";
      colgroup.appendChild(col);
      total += Math.ceil(px);
    }
    columns.forEach(function (c, col) {
      var longest = "";
      var indent = 0;
      rows.forEach(function (r) {
        var text = r[TEXT][col];
        var extra = col === 0 ? 1.1 * Math.min(r[DEPTH], 12) : 0;  // td.dN's padding, in em
        if (text.length + extra * 2 > longest.length + indent * 2) { longest = text; indent = extra; }
      });
      probe.font = style.fontWeight + " " + style.fontSize + " " + style.fontFamily;
      var width = longest ? probe.measureText(longest).width * 1.08 + (indent + 1.2) * em : 0;
      if (col === 0) { width = Math.min(width + 1.3 * em, 36 * em); }  // room for the toggle
      // A header may wrap between words (see report.css), so its longest word sets its minimum.
      probe.font = "600 " + style.fontSize + " " + style.fontFamily;
      var word = Math.max.apply(null, c.label.split(" ").map(function (w) { return probe.measureText(w).width; }));
      add(Math.max(width, word * 1.1 + 2.2 * em));  // + the sort arrow
    });
    add(5 * em);  // Ops
    table.insertBefore(colgroup, table.firstChild);
    table.style.width = total + "px";
    table.classList.add("drawn");
  }

  // Sort siblings under each parent, then lay the tree out again depth-first.
  function sortRows() {
    var col = state.sortCol;
    var type = col < 0 ? "tree" : columns[col].sort;
    var v = valueIndex[col];
    function key(i) {
      return type === "num" ? rows[i][VALUE][v] : rows[i][TEXT][col].toLowerCase();
    }
    function compare(a, b) {
      if (type !== "tree") {
        var va = key(a), vb = key(b);
        if (va !== vb) { return (va < vb ? -1 : 1) * state.sortDir; }
      }
      return a - b;  // the original (tree) order breaks ties
    }
    var k = 0;
    function place(i) {
      order[k++] = i;
      (tree.kids[i] || []).slice().sort(compare).forEach(place);
    }
    tree.roots.slice().sort(compare).forEach(place);
  }

  table.tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th.sortable");
    if (!th) { return; }
    var col = th.cellIndex;
    state.sortDir = state.sortCol === col ? -state.sortDir : (th.dataset.type === "num" ? -1 : 1);
    state.sortCol = col;
    if (th.dataset.type === "tree") { state.sortCol = -1; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", state.sortDir > 0 ? "ascending" : "descending");
    sortRows();
    update();
  });

  tbody.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) { return; }
    var i = Number(button.closest("tr").dataset.i);
    if (button.classList.contains("toggle")) {
      collapsed[i] = collapsed[i] ? 0 : 1;
    } else if (button.classList.contains("ops")) {
      opsOpen[i] = opsOpen[i] ? 0 : 1;
    }
    update();
  });

  document.getElementById("filter").addEventListener("input", function (event) {
    state.filter = event.target.value.trim().toLowerCase();
    update();
  });
  document.getElementById("depth").addEventListener("change", function (event) {
    state.maxDepth = event.target.value ? Number(event.target.value) : Infinity;
    update();
  });
  document.getElementById("expand-all").addEventListener("click", function () {
    collapsed.fill(0);
    update();
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    for (var i = 0; i < n; i++) { collapsed[i] = rows[i][DEPTH] !== 0 ? 1 : 0; }
    update();
  });

  var pending = false;
  function onScroll() {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; draw(false); });
  }
  window.addEventListener("scroll", onScroll, { passive: true });
  scroller.addEventListener("scroll", onScroll, { passive: true });
  window.addEventListener("resize", onScroll);
  // Printing from the browser: every visible row (print.css lays them out), then back.
  window.addEventListener("beforeprint", function () { drawAll = true; draw(true); });
  window.addEventListener("afterprint", function () { drawAll = false; draw(true); });

  // Source locations: made when the section is first opened, SOURCES_PAGE rows at a time (a
  // 16,000-row table laid out at once stalls the page for seconds).
  var SOURCES_PAGE = 500;
  var sourcesShown = 0;
  function showSources(body) {
    var frag = document.createDocumentFragment();
    data.sources.slice(sourcesShown, sourcesShown + SOURCES_PAGE).forEach(function (s) {
      var tr = document.createElement("tr");
      var code = document.createElement("code");
      code.textContent = s[0];
      tr.insertCell().appendChild(code);
      s.slice(1).forEach(function (text) { tr.insertCell().textContent = text; });
      frag.appendChild(tr);
    });
    body.appendChild(frag);
    sourcesShown = Math.min(data.sources.length, sourcesShown + SOURCES_PAGE);
    var more = document.getElementById("more-sources");
    var left = data.sources.length - sourcesShown;
    more.hidden = left === 0;
    more.textContent = "Show " + Math.min(left, SOURCES_PAGE) + " more (" + left + " not shown)";
  }
  var sources = document.getElementById("sources");
  sources.addEventListener("toggle", function () {
    if (sources.open && sourcesShown === 0) { showSources(sources.querySelector("tbody")); }
  });
  document.getElementById("more-sources").addEventListener("click", function () {
    showSources(sources.querySelector("tbody"));
  });

  setWidths();
  update();
  hybridprofIcicle(data);  // icicle.js, inlined before this script
}());
