(function () {
  "use strict";
  // Every text from the report data reaches the page through textContent only.
  var ROW_HEIGHT = 24, OVERSCAN = 8;
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var R = data.rows, total = R.c.length;
  var collections = data.collections, tiers = data.tiers, names = data.names;
  var grid = document.getElementById("grid"), head = document.getElementById("grid-head");
  var body = document.getElementById("grid-body"), statusLine = document.getElementById("status");

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function fmtInt(v) { return v.toLocaleString("en-US"); }
  function fmtSigned(v, decimals) {
    var text = v.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
    if (/^-0(\.0*)?$/.test(text)) text = text.slice(1);
    return v > 0 && text.charAt(0) !== "-" && !/^0(\.0*)?$/.test(text) ? "+" + text : text;
  }
  // A change in %: never "0.00%" when it is not zero (as significance.fmt_change: two significant digits,
  // at most 4 decimals, "<0.0001%" below that).
  function fmtPct(v) {
    if (v === 0) return "0.00%";
    var magnitude = Math.abs(v), sign = v > 0 ? "+" : "-";
    if (magnitude >= 0.005) return fmtSigned(v, 2) + "%";
    if (magnitude < 0.0001) return sign + "<0.0001%";
    var decimals = Math.min(4, 1 - Math.floor(Math.log10(magnitude)));
    return sign + magnitude.toFixed(decimals) + "%";
  }
  function side(v) { return v < 0 ? "good" : v > 0 ? "bad" : "same"; }
  function percent(b, d) { return b > 0 ? (d - b) / b * 100 : 0; }

  // ---------------------------------------------------------------- columns
  var deltaBytes = new Float64Array(total), deltaPct = new Float64Array(total), deltaPerf = new Float64Array(total);
  for (var i = 0; i < total; i++) {
    deltaBytes[i] = R.db[i] - R.bb[i];
    deltaPct[i] = percent(R.bb[i], R.db[i]);
    deltaPerf[i] = Math.round((R.dp[i] - R.bp[i]) * 100) / 100;
  }
  function rankOf(values) {  // rank of each distinct string in code-unit order
    var order = values.map(function (_, k) { return k; });
    order.sort(function (a, b) { return values[a] < values[b] ? -1 : values[a] > values[b] ? 1 : a - b; });
    var rank = new Int32Array(values.length);
    for (var k = 0; k < order.length; k++) rank[order[k]] = k;
    return rank;
  }
  function keyFromRank(rankFn, column) {
    return function () {
      var rank = rankFn(), key = new Float64Array(total);
      for (var k = 0; k < total; k++) key[k] = rank[column[k]];
      return key;
    };
  }
  function arrayKey(column) { return function () { return column; }; }
  var COLUMNS = [
    { label: "◆", title: "Has listings", cls: "mark", text: function (k) { return R.l[k] >= 0 ? "◆" : ""; },
      key: function () { var a = new Float64Array(total); for (var k = 0; k < total; k++) a[k] = R.l[k] >= 0 ? 0 : 1; return a; } },
    { label: "Collection", text: function (k) { return collections[R.c[k]]; },
      key: keyFromRank(function () { return rankOf(collections); }, R.c) },
    { label: "Context", cls: "n", text: function (k) { return String(R.x[k]); }, key: arrayKey(R.x) },
    { label: "Method", cls: "m", text: function (k) { return names[R.n[k]]; },
      key: keyFromRank(function () { return rankOf(names); }, R.n) },
    { label: "Tier", text: function (k) { return tiers[R.t[k]]; }, key: keyFromRank(function () { return rankOf(tiers); }, R.t) },
    { label: "Opts", text: function (k) { return R.m[k] ? "MinOpts" : "FullOpts"; }, key: arrayKey(R.m) },
    { label: "Base bytes", cls: "n", text: function (k) { return fmtInt(R.bb[k]); }, key: arrayKey(R.bb) },
    { label: "Diff bytes", cls: "n", text: function (k) { return fmtInt(R.db[k]); }, key: arrayKey(R.db) },
    { label: "Δ bytes", cls: "n", signed: deltaBytes, text: function (k) { return fmtSigned(deltaBytes[k], 0); }, key: arrayKey(deltaBytes) },
    { label: "Δ %", cls: "n", signed: deltaPct, text: function (k) { return fmtPct(deltaPct[k]); }, key: arrayKey(deltaPct) },
    { label: "Base PerfScore", cls: "n", text: function (k) { return fmtSigned(R.bp[k], 2).replace(/^\+/, ""); }, key: arrayKey(R.bp) },
    { label: "Diff PerfScore", cls: "n", text: function (k) { return fmtSigned(R.dp[k], 2).replace(/^\+/, ""); }, key: arrayKey(R.dp) },
    { label: "Δ PerfScore", cls: "n", signed: deltaPerf, text: function (k) { return fmtSigned(deltaPerf[k], 2); }, key: arrayKey(deltaPerf) }
  ];
  var keyCache = {};
  function sortKey(c) { if (!keyCache[c]) keyCache[c] = COLUMNS[c].key(); return keyCache[c]; }

  // ---------------------------------------------------------------- sorting and filtering
  var order = new Uint32Array(total);
  for (i = 0; i < total; i++) order[i] = i;
  var view = new Uint32Array(total), shown = 0, sortColumn = -1, sortDir = 1;
  var filters = { text: "", collection: "", tier: "", opts: "", kind: "", listing: false };
  var lowerNames = null;

  function sortBy(c) {
    sortDir = c === sortColumn ? -sortDir : 1;
    sortColumn = c;
    var key = sortKey(c), dir = sortDir, plain = Array.prototype.slice.call(order);
    plain.sort(function (a, b) { return (key[a] - key[b]) * dir || a - b; });
    order.set(plain);
    for (var k = 0; k < head.children.length; k++) {
      if (k === c) head.children[k].setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      else head.children[k].removeAttribute("aria-sort");
    }
    grid.setAttribute("data-sort", c + (dir > 0 ? "+" : "-"));
    applyFilters();
  }

  function nameMatches() {
    if (!filters.text) return null;
    if (!lowerNames) lowerNames = names.map(function (s) { return s.toLowerCase(); });
    var query = filters.text.toLowerCase(), hits = new Uint8Array(names.length);
    for (var k = 0; k < names.length; k++) hits[k] = lowerNames[k].indexOf(query) >= 0 ? 1 : 0;
    return hits;
  }
  function applyFilters() {
    var hits = nameMatches(), col = filters.collection === "" ? -1 : +filters.collection;
    var tier = filters.tier === "" ? -1 : +filters.tier, opts = filters.opts === "" ? -1 : +filters.opts;
    var kind = filters.kind, listing = filters.listing, count = 0;
    for (var p = 0; p < total; p++) {
      var k = order[p];
      if (col >= 0 && R.c[k] !== col) continue;
      if (tier >= 0 && R.t[k] !== tier) continue;
      if (opts >= 0 && R.m[k] !== opts) continue;
      if (kind && (kind === "improvement" ? deltaBytes[k] >= 0 : kind === "regression" ? deltaBytes[k] <= 0 : deltaBytes[k] !== 0)) continue;
      if (listing && R.l[k] < 0) continue;
      if (hits && !hits[R.n[k]]) continue;
      view[count++] = k;
    }
    shown = count;
    body.style.height = shown * ROW_HEIGHT + "px";
    var sorted = sortColumn >= 0 ? "; sorted by " + COLUMNS[sortColumn].title + (sortDir > 0 ? " ▲" : " ▼") : "";
    statusLine.textContent = fmtInt(shown) + " of " + fmtInt(total) + " contexts" + sorted;
    grid.setAttribute("data-shown", String(shown));
    draw(true);
  }

  // ---------------------------------------------------------------- virtual rows
  var pool = [], poolIndex = [], selected = -1;
  function makeRow() {
    var row = el("div", "row");
    row.setAttribute("role", "row");
    for (var c = 0; c < COLUMNS.length; c++) row.appendChild(el("span", COLUMNS[c].cls || ""));
    body.appendChild(row);
    return row;
  }
  function draw(force) {
    var first = Math.max(0, Math.floor((grid.scrollTop - 30) / ROW_HEIGHT) - OVERSCAN);
    var last = Math.min(shown, first + Math.ceil(grid.clientHeight / ROW_HEIGHT) + 2 * OVERSCAN);
    var needed = last - first;
    while (pool.length < needed) { pool.push(makeRow()); poolIndex.push(-1); }
    for (var p = 0; p < pool.length; p++) {
      var row = pool[p];
      if (p >= needed) { row.hidden = true; poolIndex[p] = -1; continue; }
      var k = view[first + p];
      row.hidden = false;
      row.style.transform = "translateY(" + (first + p) * ROW_HEIGHT + "px)";
      row.className = k === selected ? "row selected" : "row";
      if (!force && poolIndex[p] === k) continue;
      poolIndex[p] = k;
      row.setAttribute("data-row", String(k));
      for (var c = 0; c < COLUMNS.length; c++) {
        var cell = row.children[c], column = COLUMNS[c];
        cell.textContent = column.text(k);
        if (column.signed) cell.className = "n " + side(column.signed[k]);
        if (c === 1 || c === 3) cell.title = cell.textContent;
      }
    }
  }
  var pending = false;
  grid.addEventListener("scroll", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(false); });
  });
  window.addEventListener("resize", function () { draw(false); });

  // ---------------------------------------------------------------- detail panel
  var detail = document.getElementById("detail"), listingCache = {}, currentListing = null, currentView = "diff";
  function metricRows(k) {
    var rows = [["Code bytes", R.bb[k], R.db[k], 0], ["PerfScore", R.bp[k], R.dp[k], 2]];
    var out = [];
    rows.forEach(function (r) { out.push([r[0], fmtSigned(r[1], r[3]).replace(/^\+/, ""), fmtSigned(r[2], r[3]).replace(/^\+/, ""), r[2] - r[1], r[3], fmtPct(percent(r[1], r[2]))]); });
    data.metrics.forEach(function (m) {
      var lo = 0, hi = m.rows.length - 1;
      while (lo <= hi) {
        var mid = (lo + hi) >> 1;
        if (m.rows[mid] === k) { var d = m.deltas[mid]; out.push([m.name, "", "", d, Math.round(d) === d ? 0 : 2, ""]); break; }
        if (m.rows[mid] < k) lo = mid + 1; else hi = mid - 1;
      }
    });
    return out;
  }
  function showMetrics(k) {
    var table = el("table"), thead = el("thead"), tr = el("tr");
    ["Metric", "Base", "Diff", "Δ", "Δ %"].forEach(function (h, c) { tr.appendChild(el("th", c ? "num" : "", h)); });
    thead.appendChild(tr);
    table.appendChild(thead);
    var tbody = el("tbody");
    metricRows(k).forEach(function (r) {
      var row = el("tr");
      row.appendChild(el("td", "", r[0]));
      row.appendChild(el("td", "num", r[1]));
      row.appendChild(el("td", "num", r[2]));
      row.appendChild(el("td", "num " + side(r[3]), fmtSigned(r[3], r[4])));
      row.appendChild(el("td", "num", r[5]));
      tbody.appendChild(row);
    });
    table.appendChild(tbody);
    var holder = document.getElementById("d-metrics");
    holder.textContent = "";
    holder.appendChild(table);
  }
  function loadListing(index) {
    if (!listingCache[index]) listingCache[index] = JSON.parse(document.getElementById("listing-" + index).textContent);
    return listingCache[index];
  }
  function unifiedRange(start, stop) {
    var begin = start + 1, length = stop - start;
    if (length === 1) return String(begin);
    if (!length) begin -= 1;
    return begin + "," + length;
  }
  function line(out, cls, text) { out.appendChild(el("span", cls, text)); }
  function drawDiff(out, doc) {
    if (!doc.hunks.length) { line(out, "hunk", "The two listings are identical."); return; }
    doc.hunks.forEach(function (hunk) {
      var a = hunk[0], z = hunk[hunk.length - 1];
      line(out, "hunk", "@@ -" + unifiedRange(a[1], z[2]) + " +" + unifiedRange(a[3], z[4]) + " @@");
      hunk.forEach(function (op) {
        var k;
        if (op[0] === "e") { for (k = op[1]; k < op[2]; k++) line(out, "", " " + doc.base[k]); return; }
        if (op[0] === "r" || op[0] === "d") for (k = op[1]; k < op[2]; k++) line(out, "del", "-" + doc.base[k]);
        if (op[0] === "r" || op[0] === "i") for (k = op[3]; k < op[4]; k++) line(out, "add", "+" + doc.diff[k]);
      });
    });
  }
  function showListingView(name) {
    currentView = name;
    var tabs = document.querySelectorAll(".tabs button");
    for (var t = 0; t < tabs.length; t++) {
      var active = tabs[t].getAttribute("data-view") === name;
      tabs[t].className = active ? "active" : "";
      tabs[t].setAttribute("aria-selected", active ? "true" : "false");
    }
    var out = document.getElementById("d-text");
    out.textContent = "";
    var fragment = document.createDocumentFragment();
    if (name === "diff") drawDiff(fragment, currentListing);
    else (name === "base" ? currentListing.base : currentListing.diff).forEach(function (t) { line(fragment, "", t); });
    out.appendChild(fragment);
    out.setAttribute("data-view", name);
  }
  function openRow(k) {
    selected = k;
    draw(false);
    detail.hidden = false;
    document.getElementById("d-title").textContent = names[R.n[k]] || "(no method name)";
    document.getElementById("d-facts").textContent = [collections[R.c[k]], "context " + R.x[k], tiers[R.t[k]] || "(no tier)",
      R.m[k] ? "MinOpts" : "FullOpts"].join(" · ");
    showMetrics(k);
    var has = R.l[k] >= 0;
    document.getElementById("d-listing").hidden = !has;
    document.getElementById("d-nolisting").hidden = has;
    if (has) {
      currentListing = loadListing(R.l[k]);
      document.getElementById("d-repro").textContent = currentListing.repro || "(none)";
      showListingView("diff");
    }
  }
  function positionOf(k) {
    for (var p = 0; p < shown; p++) if (view[p] === k) return p;
    return -1;
  }
  function reveal(k) {
    var p = positionOf(k);
    if (p < 0) return;
    var top = p * ROW_HEIGHT + 30, bottom = top + ROW_HEIGHT;
    if (top - 30 < grid.scrollTop) grid.scrollTop = top - 30;
    else if (bottom > grid.scrollTop + grid.clientHeight) grid.scrollTop = bottom - grid.clientHeight;
    draw(false);
  }
  body.addEventListener("click", function (event) {
    var row = event.target.closest(".row");
    if (row && row.hasAttribute("data-row")) openRow(+row.getAttribute("data-row"));
  });
  grid.addEventListener("keydown", function (event) {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    event.preventDefault();
    var p = selected >= 0 ? positionOf(selected) : -1;
    p = Math.max(0, Math.min(shown - 1, p + (event.key === "ArrowDown" ? 1 : -1)));
    if (shown) { openRow(view[p]); reveal(view[p]); }
  });
  document.getElementById("d-close").addEventListener("click", function () {
    detail.hidden = true; selected = -1; draw(false);
  });
  document.querySelector(".tabs").addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (button && currentListing) showListingView(button.getAttribute("data-view"));
  });
  document.getElementById("d-copy").addEventListener("click", function () {
    var code = document.getElementById("d-repro"), text = code.textContent;
    var range = document.createRange();
    range.selectNodeContents(code);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).catch(function () {});
    else document.execCommand("copy");
  });

  // ---------------------------------------------------------------- pictures: click a bar to open its row
  function openFromPicture(target) {
    var bar = target.closest ? target.closest(".barrow") : null;
    if (!bar) return;
    var k = +bar.getAttribute("data-row");
    if (positionOf(k) < 0) resetFilters();
    openRow(k);
    reveal(k);
    grid.scrollIntoView({ block: "start" });
  }
  var pictures = document.getElementById("pictures");
  if (pictures) {
    pictures.addEventListener("click", function (event) { openFromPicture(event.target); });
    pictures.addEventListener("keydown", function (event) { if (event.key === "Enter") openFromPicture(event.target); });
  }

  // ---------------------------------------------------------------- controls
  var controls = { collection: "f-collection", tier: "f-tier", opts: "f-opts", kind: "f-kind" };
  function resetFilters() {
    Object.keys(controls).forEach(function (name) { document.getElementById(controls[name]).value = ""; filters[name] = ""; });
    document.getElementById("f-text").value = "";
    document.getElementById("f-listing").checked = false;
    filters.text = ""; filters.listing = false;
    applyFilters();
  }
  Object.keys(controls).forEach(function (name) {
    document.getElementById(controls[name]).addEventListener("change", function (event) {
      filters[name] = event.target.value; grid.scrollTop = 0; applyFilters();
    });
  });
  document.getElementById("f-listing").addEventListener("change", function (event) {
    filters.listing = event.target.checked; grid.scrollTop = 0; applyFilters();
  });
  var typing = 0;
  document.getElementById("f-text").addEventListener("input", function (event) {
    clearTimeout(typing);
    typing = setTimeout(function () { filters.text = event.target.value; grid.scrollTop = 0; applyFilters(); }, 120);
  });
  COLUMNS.forEach(function (column, c) {
    column.title = column.title || column.label;
    var cell = el("span", column.cls === "n" ? "n" : "", column.label);
    cell.title = "Sort by " + column.title;
    cell.setAttribute("role", "columnheader");
    cell.setAttribute("data-column", String(c));
    cell.addEventListener("click", function () { sortBy(c); });
    head.appendChild(cell);
  });
  // Metrics: "significant only" hides the totals the significance rules did not flag.
  var significantOnly = document.getElementById("f-significant");
  if (significantOnly) significantOnly.addEventListener("change", function (event) {
    document.getElementById("metrics").classList.toggle("significant-only", event.target.checked);
  });
  applyFilters();
  document.documentElement.setAttribute("data-ready", "1");
})();
