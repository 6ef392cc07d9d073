// hybridprof report: the icicle chart of the module tree, drawn from the embedded JSON at the
// width of the page. Each pass (forward, backward) is one SVG; a block is [row, depth, x0, x1,
// colour, time, share, self time, kind], x in fractions of the pass, colour an index into the
// pass's palette, kind 0 a leaf, 1 a parent with time of its own (drawn lighter, outlined), -1
// grey (no time of its own; dashed). The tooltip gives total, self and share. Clicking a block zooms both passes into it
// (it fills the width, its subtree below it, its ancestors above it stretched across); clicking
// an ancestor zooms out to it. Names are set as text (textContent), never as markup.
// report.js calls it with the page's data, which it has parsed already (once: it is megabytes).
var hybridprofIcicle = function (data) {
  "use strict";
  var passes = data.icicle || [];
  var svgs = document.querySelectorAll("svg.icicle[data-pass]");
  if (!passes.length || !svgs.length) { return; }
  var rows = data.table.rows;
  var PATH = 0, PARENT = 1, TEXT = 6;
  var ROW_H = 20, CHAR_W = 6.6, NS = svgs[0].namespaceURI;  // SVG's (no URL in the page)
  var PALETTE = passes[0].palette, DARK = new Set(passes[0].dark);  // icicle.py's
  var GREY = "#c9ced6";
  var zoom = -1;  // the row zoomed into (-1: the whole tree)
  var byRow = passes.map(function (p) {
    var found = new Map();
    p.blocks.forEach(function (b) { found.set(b[0], b); });
    return found;
  });
  var reset = document.getElementById("icicle-reset");
  var where = document.getElementById("icicle-where");

  function el(name, attrs) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }

  // The block a pass zooms into: the row's, or its nearest ancestor's in that pass.
  function focus(pass) {
    for (var i = zoom; i >= 0; i = rows[i][PARENT]) {
      if (byRow[pass].has(i)) { return byRow[pass].get(i); }
    }
    return null;
  }

  function label(name, time, width) {
    var fits = Math.floor((width - 6) / CHAR_W);
    if (fits < 3) { return ""; }
    if (name.length + 1 + time.length <= fits) { return name + " " + time; }
    return name.length <= fits ? name : name.slice(0, fits - 1) + "…";
  }

  // A block's look by its kind: grey and dashed, a parent lighter and outlined, a leaf solid.
  function look(b, x0, x1) {
    var attrs = { x: x0.toFixed(1), y: String(b[1] * ROW_H), width: Math.max(x1 - x0 - 1, 0.5).toFixed(1), height: String(ROW_H - 1) };
    if (b[8] < 0) {
      attrs.fill = GREY; attrs.stroke = "#8a929c"; attrs["stroke-dasharray"] = "3 2"; attrs["stroke-width"] = "0.6";
    } else if (b[8] > 0) {
      attrs.fill = PALETTE[b[4]]; attrs["fill-opacity"] = "0.5"; attrs.stroke = PALETTE[b[4]]; attrs["stroke-width"] = "1.2";
    } else {
      attrs.fill = PALETTE[b[4]];
    }
    return attrs;
  }

  function draw(svg) {
    var pass = Number(svg.dataset.pass);
    var width = svg.getBoundingClientRect().width || svg.parentNode.getBoundingClientRect().width;
    var at = focus(pass);
    var z0 = at ? at[2] : 0, z1 = at ? at[3] : 1;
    var scale = width / Math.max(z1 - z0, 1e-9);
    var frag = document.createDocumentFragment();
    passes[pass].blocks.forEach(function (b) {
      if (b[3] <= z0 || b[2] >= z1) { return; }
      var x0 = Math.max(0, (b[2] - z0) * scale), x1 = Math.min(width, (b[3] - z0) * scale);
      if (x1 - x0 < 1) { return; }
      var r = rows[b[0]];
      var name = r[TEXT][0] || r[PATH];
      var g = el("g", { "data-i": String(b[0]) });
      var title = el("title", {});
      title.textContent = (r[PATH] || "(root)") + " (" + r[TEXT][1] + "): total " + b[5] + ", self " + b[7] + ", " + b[6] + " of the pass";
      g.appendChild(title);
      g.appendChild(el("rect", look(b, x0, x1)));
      var text = label(name, b[5], x1 - x0);
      if (text) {
        var dark = b[8] === 0 && DARK.has(b[4]);
        var t = el("text", { x: (x0 + 4).toFixed(1), y: String(b[1] * ROW_H + 14) });
        if (dark) { t.setAttribute("class", "on-dark"); }
        t.textContent = text;
        g.appendChild(t);
      }
      frag.appendChild(g);
    });
    svg.setAttribute("height", String(passes[pass].depth * ROW_H));
    svg.setAttribute("font-size", "11");
    svg.replaceChildren(frag);
  }

  function drawAll() {
    Array.prototype.forEach.call(svgs, draw);
    reset.hidden = zoom < 0;
    where.textContent = zoom < 0 ? "" : "Zoomed into " + (rows[zoom][PATH] || "(root)");
  }

  Array.prototype.forEach.call(svgs, function (svg) {
    svg.addEventListener("click", function (event) {
      var g = event.target.closest("g[data-i]");
      if (!g) { return; }
      var i = Number(g.dataset.i);
      zoom = i === zoom && rows[i][PARENT] >= 0 ? rows[i][PARENT] : i;  // again: one level out
      if (zoom >= 0 && rows[zoom][PARENT] < 0) { zoom = -1; }  // the root is the whole tree
      drawAll();
    });
  });
  reset.addEventListener("click", function () { zoom = -1; drawAll(); });
  var pending = false;
  window.addEventListener("resize", function () {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; drawAll(); });
  });
  drawAll();
};
