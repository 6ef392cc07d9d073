// hybridprof history report: the commit under the pointer, the layer filter, and the
// differential icicle of any two commits (laid out as history_icicle.py lays out the first).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("hh-data").textContent);
  var WIDTH = 1000, ROW_H = 18, CHAR_W = 6.2, MIN_W = 0.6, SATURATED = 50;
  var PALE = [242, 242, 242], RED = [214, 39, 40], BLUE = [31, 119, 180], GREY = "#c9ced6";
  var CHART_W = 360, PAD_X = 4, NOISE_SPREADS = 2 * Math.sqrt(2);

  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function time(us) {
    if (us === null || us === undefined) return "-";
    if (us >= 1e6) return (us / 1e6).toFixed(3) + "s";
    if (us >= 1e3) return (us / 1e3).toFixed(3) + "ms";
    return us.toFixed(3) + "us";
  }

  // The commit under the pointer, on any layer's chart.
  var readout = document.getElementById("readout");
  function commitAt(svg, event) {
    var box = svg.getBoundingClientRect();
    var x = (event.clientX - box.left) * CHART_W / box.width;
    var n = data.commits.length;
    if (n <= 1) return 0;
    var i = Math.round((x - PAD_X) * (n - 1) / (CHART_W - 2 * PAD_X));
    return Math.max(0, Math.min(n - 1, i));
  }
  document.querySelectorAll("svg.series").forEach(function (svg) {
    var row = svg.dataset.row;
    svg.addEventListener("mousemove", function (event) {
      if (event.target.closest("g.change")) { readout.style.display = "none"; return; }
      var i = commitAt(svg, event), c = data.commits[i];
      var value = row === "drift" ? "" : ": " + time(data.values[+row][i]);
      var runs = c[2] > 1 ? " (" + c[2] + " sessions)" : "";
      var noisy = c[3] ? ", " + c[3] + " noisy" : "";
      readout.textContent = "commit " + (data.earlier + i + 1) + " " + c[0] + " " + c[1] +
        value + runs + noisy;
      readout.style.left = (event.clientX + 12) + "px";
      readout.style.top = (event.clientY + 12) + "px";
      readout.style.display = "block";
    });
    svg.addEventListener("mouseleave", function () { readout.style.display = "none"; });
  });

  // The layer filter.
  var filter = document.getElementById("filter");
  filter.addEventListener("input", function () {
    var text = filter.value.toLowerCase();
    document.querySelectorAll("#panels .panel").forEach(function (panel) {
      panel.hidden = text !== "" && panel.dataset.search.indexOf(text) < 0;
    });
  });

  // The differential icicle: tree order, parents before children (history_icicle.tree_of).
  var tree = data.tree, n = tree.length, children = [];
  for (var k = 0; k < n; k++) children.push([]);
  for (k = 0; k < n; k++) if (tree[k][1] >= 0) children[tree[k][1]].push(k);

  function own(column) {
    return tree.map(function (node) {
      return node[2] < 0 ? null : data.values[node[2]][column];
    });
  }
  function totals(values) {
    var total = new Array(n);
    for (var i = n - 1; i >= 0; i--) {
      var sum = values[i] || 0;
      children[i].forEach(function (c) { sum += total[c]; });
      total[i] = sum;
    }
    return total;
  }
  function hex(rgb) {
    return "#" + rgb.map(function (c) { return ("0" + c.toString(16)).slice(-2); }).join("");
  }
  function colour(base, now, noise, drift) {
    if (base === null || now === null || base <= 0) return GREY;
    var pct = 100 * (now / base / drift - 1);
    if (Math.abs(pct) < Math.max(data.min_change, NOISE_SPREADS * (noise || 0))) return hex(PALE);
    var depth = Math.min(Math.abs(pct) / SATURATED, 1), target = pct > 0 ? RED : BLUE;
    return hex(PALE.map(function (p, j) {
      return Math.round(p + (target[j] - p) * (0.25 + 0.75 * depth));
    }));
  }
  function noiseOf(node) {
    return tree[node][2] < 0 ? null : data.noise[tree[node][2]];
  }
  function label(name, width) {
    var fits = Math.floor((width - 6) / CHAR_W);
    if (fits < 3) return "";
    return name.length <= fits ? name : name.slice(0, fits - 1) + "\u2026";
  }
  function pct(a, b) {
    return a ? " (" + (100 * (b / a - 1) >= 0 ? "+" : "") + (100 * (b / a - 1)).toFixed(1) + "%)" : "";
  }
  // The blocks of the pair: [node, depth, x0, x1], depth first (as _placed in Python).
  function layout(base, now) {
    var ownBase = own(base), ownNew = own(now), totalBase = totals(ownBase), totalNew = totals(ownNew);
    var whole = totalNew[0], blocks = [];
    if (!(whole > 0)) return {blocks: blocks, ownBase: ownBase, ownNew: ownNew, totalBase: totalBase, totalNew: totalNew};
    var pending = [[0, 0, 0]];
    while (pending.length) {
      var item = pending.pop(), node = item[0], depth = item[1], x = item[2];
      blocks.push([node, depth, x / whole, (x + totalNew[node]) / whole]);
      var placed = [], left = x;
      children[node].forEach(function (c) {
        if (totalNew[c] > 0) { placed.push([c, depth + 1, left]); left += totalNew[c]; }
      });
      for (var j = placed.length - 1; j >= 0; j--) pending.push(placed[j]);
    }
    return {blocks: blocks, ownBase: ownBase, ownNew: ownNew, totalBase: totalBase, totalNew: totalNew};
  }
  function draw(base, now) {
    var laid = layout(base, now), parts = [], depthMax = 0;
    var drift = data.drift.length ? data.drift[now] / data.drift[base] : 1;
    laid.blocks.forEach(function (b) {
      var node = b[0], x = b[2] * WIDTH, w = (b[3] - b[2]) * WIDTH, y = b[1] * ROW_H;
      depthMax = Math.max(depthMax, b[1] + 1);
      if (w < MIN_W) return;
      var path = tree[node][0], name = path.split(".").pop() || "(root)";
      var a = laid.ownBase[node], z = laid.ownNew[node];
      var tip = (path || "(root)") + ": self " + time(a) + " \u2192 " + time(z) +
        (a && z !== null ? pct(a, z) : "") + "; subtree " + time(laid.totalBase[node]) +
        " \u2192 " + time(laid.totalNew[node]);
      var text = label(name, w);
      parts.push('<g><title>' + esc(tip) + '</title><rect x="' + x.toFixed(1) + '" y="' +
        y.toFixed(1) + '" width="' + Math.max(w - 0.5, 0.3).toFixed(1) + '" height="' +
        (ROW_H - 1) + '" fill="' + colour(a, z, noiseOf(node), drift) + '"/>' + (text ? '<text x="' + (x + 3).toFixed(1) +
        '" y="' + (y + 12.5).toFixed(1) + '">' + esc(text) + "</text>" : "") + "</g>");
    });
    var svg = document.getElementById("icicle"), height = Math.max(depthMax, 1) * ROW_H;
    svg.setAttribute("viewBox", "0 0 " + WIDTH + " " + height);
    svg.setAttribute("height", height);
    svg.innerHTML = parts.join("");
    var names = document.querySelectorAll("#base option");
    document.getElementById("pair").textContent = names[base].textContent + " \u2192 " +
      names[now].textContent;
    svg.dataset.blocks = JSON.stringify(laid.blocks.map(function (b) {
      var colourOf = colour(laid.ownBase[b[0]], laid.ownNew[b[0]], noiseOf(b[0]), drift);
      return [tree[b[0]][0], b[1], +b[2].toFixed(6), +b[3].toFixed(6), colourOf];
    }));
  }
  var baseList = document.getElementById("base"), newList = document.getElementById("new");
  function redraw() { draw(+baseList.value, +newList.value); }
  baseList.addEventListener("change", redraw);
  newList.addEventListener("change", redraw);
  if (data.commits.length) redraw();
})();
