/* The what-if panel's drawings (whatif.js runs the panel): a Gantt chart
 * of a simulation answer or a measured step, its critical path as arrows,
 * per-rank bars (peak memory, why idle) and the diff of two timelines.
 * Everything is an SVG string built here and set once: a chart of 25,000
 * actions draws in a few tens of milliseconds.
 *
 * A timeline here is {events: [{rank, stage, mb, op, start, end}],
 * p, unit, chunkOf(stage)}; kaiten sim's JSON gives the events.
 */
(function () {
  var K = window.ktWhatIf = window.ktWhatIf || {};
  var OPS = { F: '#0072B2', B: '#E69F00', I: '#CC79A7', W: '#009E73' };
  var L = 64, R = 20, TOP = 8, AXIS = 30;
  K.OPS = OPS;

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c];
    });
  }
  function num(v, d) {
    if (v === null || v === undefined || !isFinite(v)) return '\u2013';
    return String(+(+v).toPrecision(d || 6));
  }
  K.esc = esc;
  K.num = num;

  function niceStep(x) {
    if (!(x > 0) || !isFinite(x)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(x)));
    return x <= p ? p : x <= 2 * p ? 2 * p : x <= 5 * p ? 5 * p : 10 * p;
  }

  /* ticks of [0, span] along a plot of w px starting at x0 */
  function axis(span, x0, ppu, y, unit) {
    var step = niceStep(span / 8), s = '', t;
    for (t = 0; t <= span * (1 + 1e-9); t += step) {
      var x = (x0 + t * ppu).toFixed(1);
      s += '<line x1="' + x + '" x2="' + x + '" y1="' + y + '" y2="' + (y + 4) +
           '" stroke="#888888"/><text x="' + x + '" y="' + (y + 15) +
           '" text-anchor="middle" font-size="10" fill="#555555">' + num(t, 4) + '</text>';
    }
    return s + '<text x="' + (x0 + span * ppu) + '" y="' + (y + 27) +
           '" text-anchor="end" font-size="10" fill="#555555">time (' + esc(unit) + ')</text>';
  }

  /* index of each event's chunk (0 for its rank's first stage) */
  K.chunker = function (stageRank) {
    var seen = {}, chunk = [];
    for (var s = 0; s < stageRank.length; s++) {
      var r = stageRank[s];
      chunk[s] = seen[r] || 0;
      seen[r] = chunk[s] + 1;
    }
    return function (st) { return chunk[st] || 0; };
  };

  /* The chart: a canvas with the bars (tens of thousands draw in a few
   * milliseconds) under an SVG with the rank labels, the time axis and the
   * marks (critical path, blocked actions, a bar being dragged). opts
   * {width, t0, span, id, shift (per event: how far it moved, for the
   * diff)}. Returns {el, svg, tl, box(i), hit(x, y), marks(svg text)}. */
  K.chart = function (host, tl, o) {
    var P = tl.p, rowH = P <= 8 ? 22 : P <= 16 ? 16 : 10, W = o.width;
    var span = o.span > 0 ? o.span : 1, ppu = (W - L - R) / span, H = TOP + P * rowH + AXIS;
    var box = document.createElement('div'), dpr = window.devicePixelRatio || 1;
    box.className = 'kt-wi-chartbox';
    box.style.position = 'relative';
    box.style.width = W + 'px';
    box.style.height = H + 'px';
    if (o.id) box.id = o.id;
    var canvas = document.createElement('canvas');
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.width = W + 'px';
    canvas.style.height = H + 'px';
    canvas.style.position = 'absolute';
    box.appendChild(canvas);
    var labels = [];
    for (var r = 0; r < P; r++)
      labels.push('<text x="' + (L - 6) + '" y="' + (TOP + r * rowH + rowH / 2 + 4) +
                  '" text-anchor="end" font-size="11" fill="#333333">rank ' + r + '</text>');
    box.insertAdjacentHTML('beforeend', '<svg class="kt-wi-gantt" width="' + W + '" height="' + H +
      '" style="position:absolute;left:0;top:0" data-ppu="' + ppu + '" data-x0="' + L + '" data-t0="' +
      o.t0 + '" data-row="' + rowH + '" data-top="' + TOP + '">' + labels.join('') +
      axis(span, L, ppu, TOP + P * rowH + 2, tl.unit || 'unit') +
      '<g class="kt-wi-marks"></g><g class="kt-wi-drag"></g></svg>');
    host.appendChild(box);
    var ch = { el: box, canvas: canvas, svg: box.lastChild, tl: tl, ppu: ppu, t0: o.t0, rowH: rowH, P: P };
    ch.box = function (i) {
      var e = tl.events[i];
      return { x: L + (e.start - o.t0) * ppu, y: TOP + e.rank * rowH + 3,
               w: Math.max((e.end - e.start) * ppu, 0.5), h: rowH - 6 };
    };
    ch.time = function (x) { return o.t0 + (x - L) / ppu; };
    ch.marks = function (text) { ch.svg.querySelector('.kt-wi-marks').innerHTML = text; };
    ch.hit = hitter(ch);
    paint(ch, o, dpr);
    return ch;
  };

  function paint(ch, o, dpr) {
    var c = ch.canvas.getContext('2d'), tl = ch.tl, ev = tl.events, W = ch.canvas.width / dpr;
    c.scale(dpr, dpr);
    c.fillStyle = '#F3F4F6';
    for (var r = 0; r < ch.P; r++) c.fillRect(L, TOP + r * ch.rowH + 1, W - L - R, ch.rowH - 2);
    var label = ev.length <= 3000;
    c.font = '10px sans-serif';
    c.textAlign = 'center';
    c.textBaseline = 'middle';
    for (var i = 0; i < ev.length; i++) {
      var e = ev[i], b = ch.box(i);
      c.globalAlpha = tl.chunkOf && tl.chunkOf(e.stage) > 0 ? 0.6 : 1;
      c.fillStyle = OPS[e.op] || '#999999';
      c.fillRect(b.x, b.y, b.w, b.h);
      c.globalAlpha = 1;
      var d = o.shift ? o.shift[i] : 0;
      if (d === null || (d && Math.abs(d) > 1e-9)) { /* the diff: moved (or new) actions outlined */
        c.strokeStyle = '#000000';
        c.lineWidth = d === null ? 1 : Math.min(3, 1 + Math.abs(d));
        c.strokeRect(b.x + 0.5, b.y + 0.5, Math.max(b.w - 1, 0.5), b.h - 1);
      }
      var text = (tl.v > 1 ? e.stage : '') + e.op + e.mb;
      if (label && b.w > 7 * text.length + 4) {
        c.fillStyle = e.op === 'B' ? '#000000' : '#FFFFFF';
        c.fillText(text, b.x + b.w / 2, b.y + b.h / 2 + 0.5);
      }
    }
  }

  /* The event under a chart point (-1: none): each rank's events by start,
   * found by bisection. */
  function hitter(ch) {
    var ev = ch.tl.events, rows = [], r, i;
    for (r = 0; r < ch.P; r++) rows.push([]);
    for (i = 0; i < ev.length; i++) if (rows[ev[i].rank]) rows[ev[i].rank].push(i);
    for (r = 0; r < ch.P; r++) rows[r].sort(function (a, b) { return ev[a].start - ev[b].start; });
    return function (x, y) {
      var row = rows[Math.floor((y - TOP) / ch.rowH)], t = ch.time(x);
      if (!row) return -1;
      var lo = 0, hi = row.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (ev[row[mid]].start <= t) lo = mid + 1; else hi = mid; }
      var k = row[lo - 1];
      return k !== undefined && t <= ev[k].end ? k : -1;
    };
  }

  /* A path of event indices: each bar on it marked by a line in the gap
   * above it (never over a bar or its label, so a long path on one rank
   * leaves its bars readable), and an arrow where the path goes from one
   * rank to another (a bar's end to the next bar's start). Returns the
   * marks' SVG. */
  K.pathMarks = function (ch, path) {
    var ev = ch.tl.events, out = [];
    for (var k = 0; k < path.length; k++) {
      var e = ev[path[k]], b = ch.box(path[k]);
      out.push('<rect class="kt-wi-crit" x="' + b.x.toFixed(2) + '" y="' + (b.y - 2.5).toFixed(2) +
               '" width="' + Math.max(b.w, 1).toFixed(2) + '" height="2" fill="#D55E00" pointer-events="none"/>');
      if (!k) continue;
      var a = ev[path[k - 1]], pa = ch.box(path[k - 1]);
      var ax = pa.x + pa.w, ay = pa.y + pa.h / 2, bx = b.x, by = b.y + b.h / 2;
      if (a.rank === e.rank) continue; /* along a rank: the line above says it */
      var dx = bx - ax, dy = by - ay, len = Math.sqrt(dx * dx + dy * dy) || 1;
      var ux = dx / len, uy = dy / len, hx = bx - 7 * ux, hy = by - 7 * uy;
      out.push('<line class="kt-wi-arrow" x1="' + ax.toFixed(1) + '" y1="' + ay.toFixed(1) + '" x2="' +
               hx.toFixed(1) + '" y2="' + hy.toFixed(1) + '" stroke="#D55E00" stroke-width="1.2" ' +
               'stroke-opacity="0.8" pointer-events="none"/>' +
               '<polygon class="kt-wi-head" points="' + bx.toFixed(1) + ',' + by.toFixed(1) + ' ' +
               (hx - 3.5 * uy).toFixed(1) + ',' + (hy + 3.5 * ux).toFixed(1) + ' ' + (hx + 3.5 * uy).toFixed(1) +
               ',' + (hy - 3.5 * ux).toFixed(1) + '" fill="#D55E00"/>');
    }
    return out.join('');
  };

  /* Horizontal stacked bars, one row per rank: rows [{label, parts:
   * [value...]}], names and colours per part. */
  K.stacked = function (o, rows, names, colors) {
    var W = o.width || 560, rowH = 16, top = 22, left = 70, right = 70, max = 0, r, j;
    for (r = 0; r < rows.length; r++) {
      var sum = 0;
      for (j = 0; j < rows[r].parts.length; j++) sum += Math.max(0, rows[r].parts[j]);
      max = Math.max(max, o.max || 0, sum);
    }
    if (!(max > 0)) max = 1;
    var H = top + rows.length * rowH + 8, s = ['<svg class="kt-wi-bars-chart" width="' + W + '" height="' + H + '"' + (o.id ? ' id="' + esc(o.id) + '"' : '') + '>'];
    var lx = left;
    for (j = 0; j < names.length; j++) {
      s.push('<rect x="' + lx + '" y="4" width="10" height="10" fill="' + colors[j] + '"/><text x="' +
             (lx + 14) + '" y="13" font-size="11" fill="#333333">' + esc(names[j]) + '</text>');
      lx += 24 + 6.5 * names[j].length;
    }
    var scale = (W - left - right) / max;
    for (r = 0; r < rows.length; r++) {
      var y = top + r * rowH, x = left;
      s.push('<text x="' + (left - 6) + '" y="' + (y + 11) + '" text-anchor="end" font-size="11">' +
             esc(rows[r].label) + '</text>');
      for (j = 0; j < rows[r].parts.length; j++) {
        var v = Math.max(0, rows[r].parts[j]), w = v * scale;
        s.push('<rect data-rank="' + r + '" data-part="' + esc(names[j]) + '" data-value="' + v +
               '" x="' + x.toFixed(2) + '" y="' + (y + 2) + '" width="' + w.toFixed(2) + '" height="' +
               (rowH - 4) + '" fill="' + colors[j] + '"/>');
        x += w;
      }
      s.push('<text x="' + (x + 4).toFixed(1) + '" y="' + (y + 11) + '" font-size="10" fill="#444444">' +
             esc(rows[r].text || '') + '</text>');
    }
    if (o.limit > 0) {
      var lxp = left + o.limit * scale;
      s.push('<line x1="' + lxp + '" x2="' + lxp + '" y1="' + (top - 2) + '" y2="' + (H - 6) +
             '" stroke="#B00020" stroke-dasharray="4 2"/>');
    }
    return s.join('') + '</svg>';
  };

  /* Why idle in a simulation: each rank's idle (makespan - busy) split into
   * the structural bubble (makespan - the busiest rank's busy time: what
   * even the busiest rank waits, filling and draining the pipeline) and
   * imbalance (busiest - this rank's busy: work other ranks have more of). */
  K.idleSplit = function (sim) {
    var most = 0, out = [], r;
    for (r = 0; r < sim.ranks.length; r++) most = Math.max(most, sim.ranks[r].busy);
    for (r = 0; r < sim.ranks.length; r++) {
      var b = sim.ranks[r].busy;
      out.push({ busy: b, structural: sim.makespan - most, imbalance: most - b });
    }
    return out;
  };

  /* The measured idle causes, in order (a step's ranks[].idle_causes, seconds). */
  K.CAUSES = ['schedule', 'core_wait', 'comm', 'overhead', 'optimizer'];

  /* Two timelines on one axis: per action of b, how far it moved from the
   * same action of a (matched by stage, micro-batch and op; a full B
   * matches an I), and the summary. */
  K.diff = function (a, b) {
    var key = function (e) { return e.stage + ':' + e.mb + ':' + (e.op === 'B' ? 'I' : e.op); };
    var at = {}, shift = [], moved = 0, most = 0, i;
    for (i = 0; i < a.events.length; i++) at[key(a.events[i])] = a.events[i];
    for (i = 0; i < b.events.length; i++) {
      var o = at[key(b.events[i])];
      shift.push(o ? b.events[i].start - o.start : null);
      if (o && Math.abs(shift[i]) > 1e-9) moved++;
      if (o && Math.abs(shift[i]) > Math.abs(most)) most = shift[i];
    }
    return { shift: shift, moved: moved, most: most };
  };
})();
