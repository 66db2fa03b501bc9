/* The live dashboard: reads the server's event stream (hello, step,
 * timeline, end) and redraws the page from it, at most a few times a
 * second. Curves of several runs overlay, one colour per run. Charts are
 * inline SVG drawn here; the Gantt charts come rendered by the server (the
 * same renderer as the reports) and get the conveyor-belt replay.
 *
 * <body data-live> says where the page is: connecting, live, finished
 * (every run ended; the stream is closed) or lost; data-steps counts the
 * step records received and data-draws the redraws, window.ktDashboard.run(i)
 * gives a run as the page holds it (test hooks).
 */
(function () {
  var COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000',
                '#8C8C00'];
  var body = document.body, runs = [], pending = false, received = 0, draws = 0;
  var $ = function (id) { return document.getElementById(id); };

  /* the SVG namespace, as the HTML parser assigns it */
  var SVGNS = (function () {
    var probe = document.createElement('div');
    probe.innerHTML = '<svg></svg>';
    return probe.firstChild.namespaceURI;
  })();
  function svgEl(name, attrs, parent) {
    var e = document.createElementNS(SVGNS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function fmt(v, d) {
    if (v === null || v === undefined || !isFinite(v)) return '\u2013';
    var a = Math.abs(v);
    if (a >= 1e15 || (a > 0 && a < 1e-6)) return v.toExponential(2);
    if (a >= 1e6) return (v / 1e6).toFixed(2) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    return String(+v.toPrecision(d || 4));
  }
  function bytes(v) {
    if (!isFinite(v)) return '\u2013';
    var u = ['B', 'KiB', 'MiB', 'GiB'], i = 0;
    while (Math.abs(v) >= 1024 && i < 3) { v /= 1024; i++; }
    return String(+v.toPrecision(3)) + ' ' + u[i];
  }
  /* Axes bounded for any values, as the C charts (src/report/axis.c): values
   * within +-1e300, ranges at least a billionth of their magnitude wide, at
   * most MAX_TICKS ticks counted by index (a step added to 2^53 + ... no
   * longer moves it, and a loop adding it would never end). */
  var AXIS_MAX = 1e300, MAX_TICKS = 64;
  function clamp(v) { return v !== v ? 0 : Math.max(-AXIS_MAX, Math.min(AXIS_MAX, v)); }
  function niceStep(x) {
    if (!(x > 0) || !isFinite(x)) return 1;
    x = Math.max(1e-300, Math.min(AXIS_MAX, x));
    var p = Math.pow(10, Math.floor(Math.log10(x)));
    return x <= p * 1.0000001 ? p : x <= 2 * p ? 2 * p : x <= 5 * p ? 5 * p : 10 * p;
  }
  function range(lo, hi) {
    lo = clamp(lo); hi = clamp(hi);
    if (hi < lo) { var t = lo; lo = hi; hi = t; }
    var mag = Math.max(Math.abs(lo), Math.abs(hi));
    if (hi - lo < mag * 1e-9 || hi - lo < 1e-300) {
      var pad = Math.max(mag > 0 ? mag * 0.1 : 1, 1e-300);
      lo = clamp(lo - pad); hi = clamp(hi + pad);
    }
    return [lo, hi];
  }
  /* the tick values on [v0, v1] at a nice step of at least minStep */
  function ticks(v0, v1, minStep) {
    var mag = Math.max(Math.abs(v0), Math.abs(v1));
    var step = niceStep(Math.max(minStep, (v1 - v0) / (MAX_TICKS - 1), mag * 1e-12));
    var k0 = Math.ceil(v0 / step - 1e-9), k1 = Math.floor(v1 / step + 1e-9), out = [];
    for (var k = 0; k0 + k <= k1 && k < MAX_TICKS; k++) out.push((k0 + k) * step);
    return { step: step, values: out };
  }
  function text(parent, x, y, s, attrs) {
    var t = svgEl('text', attrs || {}, parent);
    t.setAttribute('x', x);
    t.setAttribute('y', y);
    t.textContent = s;
    return t;
  }

  /* A line chart: series [{name, color, dashed, markers, pts: [[x, y]...]}],
   * thinned to the first, lowest, highest and last point of each pixel column;
   * o.events [{x, label, color}]: a dashed vertical line at each (the
   * autopilot's faults and switches), labelled at its top. */
  function lineChart(host, o, series) {
    var W = o.width, H = o.height, L = 64, R = 16, B = 40, i, j, s;
    /* legend entries left to right, wrapping: the plot starts below them */
    var lx = L, ly = 30, items = [];
    for (i = 0; i < series.length; i++) {
      if (!series[i].name) continue;
      var w = 34 + 6.2 * series[i].name.length;
      if (lx + w > W - R && lx > L) { lx = L; ly += 16; }
      items.push([series[i], lx, ly]);
      lx += w;
    }
    var T = ly + 14;
    var x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (i = 0; i < series.length; i++)
      for (j = 0; j < series[i].pts.length; j++) {
        var p = series[i].pts[j];
        if (!isFinite(p[0]) || !isFinite(p[1])) continue;
        x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[0]);
        y0 = Math.min(y0, p[1]); y1 = Math.max(y1, p[1]);
      }
    if (!isFinite(x0)) { x0 = 0; x1 = 1; y0 = 0; y1 = 1; }
    if (x1 <= x0) x1 = x0 + 1;
    var xr = range(x0, x1); x0 = xr[0]; x1 = xr[1];
    if (y0 >= 0 && !o.fitY) y0 = 0;
    var yr = range(y0, y1);
    var yt = ticks(yr[0], yr[1], (yr[1] - yr[0]) / 4);
    y0 = clamp(Math.floor(yr[0] / yt.step) * yt.step);
    y1 = clamp(Math.ceil(yr[1] / yt.step) * yt.step);
    yr = range(y0, y1); y0 = yr[0]; y1 = yr[1];
    var yticks = ticks(y0, y1, yt.step).values;
    var edge = function (v) { return Math.max(-1e7, Math.min(1e7, v)); };
    var fx = function (x) { return edge(L + (clamp(x) - x0) * ((W - L - R) / (x1 - x0))); };
    var fy = function (y) { return edge(H - B - (clamp(y) - y0) * ((H - B - T) / (y1 - y0))); };
    var svg = svgEl('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                             'font-size': '11', id: o.id, 'data-chart': 'line' });
    text(svg, L, 15, o.title, { 'font-weight': 'bold', 'font-size': '12' });
    for (i = 0; i < items.length; i++) {
      s = items[i][0];
      svgEl('line', { x1: items[i][1], x2: items[i][1] + 16, y1: items[i][2] - 4,
                      y2: items[i][2] - 4, stroke: s.color, 'stroke-width': '2.5',
                      'stroke-dasharray': s.dashed ? '5 3' : 'none' }, svg);
      text(svg, items[i][1] + 20, items[i][2], s.name, { fill: '#333333' });
    }
    var g = svgEl('g', { fill: '#444444' }, svg);
    var v, k;
    for (k = 0; k < yticks.length; k++) {
      v = yticks[k];
      svgEl('line', { x1: L, x2: W - R, y1: fy(v), y2: fy(v), stroke: '#E4E4E4' }, g);
      text(g, L - 6, fy(v) + 4, fmt(+v.toPrecision(6)), { 'text-anchor': 'end' });
    }
    var xs = niceStep((x1 - x0) / Math.max(1, (W - L - R) / 90));
    if (xs < 1 && o.integerX) xs = 1;
    var xticks = ticks(x0, x1, xs).values;
    for (k = 0; k < xticks.length; k++) {
      v = xticks[k];
      svgEl('line', { x1: fx(v), x2: fx(v), y1: H - B, y2: H - B + 4, stroke: '#888888' }, g);
      text(g, fx(v), H - B + 15, fmt(+v.toPrecision(6)), { 'text-anchor': 'middle' });
    }
    svgEl('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: '#888888' }, g);
    svgEl('line', { x1: L, x2: L, y1: T, y2: H - B, stroke: '#888888' }, g);
    text(g, (L + W - R) / 2, H - 6, o.xLabel, { 'text-anchor': 'middle' });
    for (k = 0; o.events && k < o.events.length; k++) {
      var ev = o.events[k], ex = fx(ev.x);
      if (ev.x < x0 || ev.x > x1) continue;
      var m = svgEl('g', { 'class': 'event' }, svg);
      svgEl('line', { x1: ex, x2: ex, y1: T, y2: H - B, stroke: ev.color, 'stroke-width': '1.5',
                      'stroke-dasharray': '4 3' }, m);
      text(m, ex + 3, T + 10 + 11 * (k % 3), ev.label, { fill: ev.color, 'font-size': '10' });
      svgEl('title', {}, m).textContent = ev.tip || ev.label;
    }
    text(g, 0, 0, o.yLabel, { 'text-anchor': 'middle',
                              transform: 'translate(14 ' + (T + H - B) / 2 + ') rotate(-90)' });
    for (i = 0; i < series.length; i++) {
      s = series[i];
      var d = [], col = null, lo = null, hi = null, first = null, lastp = null, pen = false;
      var flush = function () {
        if (first === null) return;
        var keep = [first, lo, hi, lastp];
        if (keep[1][0] > keep[2][0]) keep = [first, hi, lo, lastp];
        for (var k = 0; k < 4; k++) {
          if (k && keep[k] === keep[k - 1]) continue;
          d.push((pen ? 'L' : 'M') + fx(keep[k][0]).toFixed(1) + ' ' + fy(keep[k][1]).toFixed(1));
          pen = true;
        }
        first = null;
      };
      for (j = 0; j < s.pts.length; j++) {
        p = s.pts[j];
        if (!isFinite(p[1])) { flush(); pen = false; continue; }
        var c = Math.floor(fx(p[0]));
        if (c !== col) { flush(); col = c; first = lo = hi = p; }
        if (p[1] < lo[1]) lo = p;
        if (p[1] > hi[1]) hi = p;
        lastp = p;
      }
      flush();
      if (d.length) svgEl('path', { d: d.join(''), fill: 'none', stroke: s.color,
                                    'stroke-width': '1.8', 'stroke-linejoin': 'round',
                                    'stroke-dasharray': s.dashed ? '5 3' : 'none',
                                    'data-series': String(i), 'data-name': s.name || '',
                                    'data-n': String(s.pts.length) }, svg);
      if (s.markers && s.pts.length <= 60)
        for (j = 0; j < s.pts.length; j++)
          if (isFinite(s.pts[j][1]))
            svgEl('circle', { cx: fx(s.pts[j][0]), cy: fy(s.pts[j][1]), r: '3', fill: s.color,
                              stroke: '#FFFFFF' }, svg);
    }
    host.replaceChildren(svg);
  }

  /* The predicted bubble at every step, in %: the latest rendered step's at
   * or before it (its costs hold until the next is calibrated), the first
   * one's before it; the rendered steps alone when no step is held. */
  function predictedAt(r) {
    if (!r.predicted.length || !r.steps.length) return r.predicted;
    var out = [], k = 0;
    for (var j = 0; j < r.steps.length; j++) {
      var at = r.steps[j].step;
      while (k + 1 < r.predicted.length && r.predicted[k + 1][0] <= at) k++;
      out.push([at, r.predicted[k][1]]);
    }
    return out;
  }

  /* A bar chart's longest value, bounded, never 0. */
  function barScale(max) {
    max = clamp(max);
    return max > 0 ? max : 1;
  }

  /* A bar chart's svg with its title (o.id, o.title; kind: its data-chart). */
  function barFrame(o, W, H, kind) {
    var svg = svgEl('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'font-size': '11',
                             id: o.id, 'data-chart': kind });
    text(svg, 4, 15, o.title, { 'font-weight': 'bold', 'font-size': '12' });
    return svg;
  }

  /* Horizontal bars: rows [{label, value, sub}] (sub: a thin grey bar under it). */
  function barChart(host, o, rows) {
    var W = o.width, L = 150, R = 90, rowH = 26, T = 24, nm = o.marks ? o.marks.length : 0;
    var H = T + rows.length * rowH + 28 + 12 * nm, max = o.max || 0, i;
    for (i = 0; i < rows.length && !o.max; i++) max = Math.max(max, rows[i].value || 0, rows[i].sub || 0);
    for (i = 0; i < nm && !o.max; i++) max = Math.max(max, o.marks[i].value);
    var svg = barFrame(o, W, H, 'bar');
    var px = (W - L - R) / barScale(max);
    for (i = 0; i < rows.length; i++) {
      var r = rows[i], y = T + i * rowH + 4, v = isFinite(r.value) ? r.value : 0;
      text(svg, L - 6, y + 12, r.label, { 'text-anchor': 'end', fill: '#222222' });
      svgEl('rect', { x: L, y: y, width: (W - L - R), height: 14, fill: '#EEF1F4' }, svg);
      svgEl('rect', { x: L, y: y, width: Math.max(0.5, v * px), height: 14, fill: o.color,
                      'data-bar': String(i), 'data-value': String(v) }, svg);
      if (r.sub !== undefined && isFinite(r.sub))
        svgEl('rect', { x: L, y: y + 16, width: Math.max(0.5, r.sub * px), height: 4,
                        fill: '#777777', 'data-pred': '1' }, svg);
      text(svg, L + v * px + 5, y + 11, r.text, { fill: '#222222' });
    }
    for (i = 0; o.marks && i < o.marks.length; i++) { /* vertical lines: 1F1B's peak, the limit */
      var mk = o.marks[i], mx = L + mk.value * px;
      svgEl('line', { x1: mx, x2: mx, y1: T, y2: T + rows.length * rowH + 4, stroke: mk.color,
                      'stroke-width': '1.5', 'stroke-dasharray': mk.dashed ? '5 3' : 'none',
                      'data-mark': mk.name, 'data-value': String(mk.value) }, svg);
      text(svg, mx + 3, T + rows.length * rowH + 16 + 12 * i, mk.label, { fill: mk.color });
    }
    if (o.note) text(svg, L, H - 8, o.note, { fill: '#666666' });
    host.replaceChildren(svg);
  }

  /* Stacked horizontal bars: rows [{label, parts, text}], one colour per
   * part (names, colors), all on one scale (the longest row). */
  function stackedChart(host, o, rows, names, colors) {
    var W = o.width, L = 150, R = 90, rowH = 22, T = 24, i, j, max = 0;
    var H = T + rows.length * rowH + 34;
    for (i = 0; i < rows.length; i++) {
      var tot = 0;
      for (j = 0; j < rows[i].parts.length; j++) tot += isFinite(rows[i].parts[j]) ? Math.max(0, rows[i].parts[j]) : 0;
      max = Math.max(max, tot);
    }
    var svg = barFrame(o, W, H, 'stacked');
    var px = (W - L - R) / barScale(max);
    for (i = 0; i < rows.length; i++) {
      var y = T + i * rowH + 4, x = L;
      text(svg, L - 6, y + 11, rows[i].label, { 'text-anchor': 'end', fill: '#222222' });
      for (j = 0; j < rows[i].parts.length; j++) {
        var v = isFinite(rows[i].parts[j]) ? Math.max(0, rows[i].parts[j]) : 0;
        var rect = svgEl('rect', { x: x, y: y, width: v * px, height: 14, fill: colors[j],
                                   'data-part': names[j], 'data-value': String(v) }, svg);
        svgEl('title', {}, rect).textContent = names[j] + ': ' + rows[i].tip(v);
        x += v * px;
      }
      text(svg, x + 5, y + 11, rows[i].text, { fill: '#222222' });
    }
    for (j = 0, x = L; j < names.length; j++) { /* the legend */
      svgEl('rect', { x: x, y: H - 18, width: 10, height: 10, fill: colors[j] }, svg);
      x += 14 + 6.2 * text(svg, x + 14, H - 9, names[j], { fill: '#444444' }).textContent.length + 10;
    }
    host.replaceChildren(svg);
  }
  var IDLE_CAUSES = ['schedule', 'core_wait', 'comm', 'overhead', 'optimizer'];
  var IDLE_COLORS = ['#0072B2', '#BBBBBB', '#CC79A7', '#56B4E9', '#E69F00', '#000000'];

  /* Why each rank idled in step s (ranks[].idle_causes): its ops' own time,
   * then the causes; hidden when the step has none (older runs, MPI ranks
   * without the others' events). */
  function idleCauses(s, i) {
    var host = $('idle-' + i), rows = [], any = false;
    if (!host) return;
    for (var k = 0; k < s.ranks.length; k++) {
      var c = s.ranks[k].idle_causes;
      if (!c) continue;
      any = true;
      var parts = [c.compute !== undefined ? c.compute : c.busy]; /* runs before "compute" wrote "busy" */
      for (var j = 0; j < IDLE_CAUSES.length; j++) parts.push(c[IDLE_CAUSES[j]]);
      rows.push({ label: 'rank ' + k, parts: parts, text: fmt(1e3 * c.seconds, 3) + ' ms',
                  tip: function (v) { return fmt(1e3 * v, 3) + ' ms'; } });
    }
    host.hidden = !any;
    if (any) stackedChart(host, { id: 'live-idle-' + i, width: 620,
                                  title: 'Why idle, step ' + s.step + ' (ms of the step)' },
                          rows, ['compute'].concat(IDLE_CAUSES), IDLE_COLORS);
  }

  function stagesOf(run, rank) {
    var tl = run.tl && run.tl.measured, seen = [];
    if (tl) for (var i = 0; i < tl.events.length; i++) {
      var e = tl.events[i];
      if (e.rank === rank && seen.indexOf(e.stage) < 0) seen.push(e.stage);
    }
    return seen.length ? seen.sort(function (a, b) { return a - b; }).join(', ') : String(rank);
  }

  function last(run) { return run.steps.length ? run.steps[run.steps.length - 1] : null; }
  /* the record of step n (the rendered step's), null when not received */
  function stepRecord(run, n) {
    for (var k = run.steps.length - 1; k >= 0; k--) if (run.steps[k].step === n) return run.steps[k];
    return null;
  }

  /* tokens/s once warm: the median over the steps after the run's first
   * (the first alone when it is all there is), as train's summary says it */
  function steady(run) {
    var v = [];
    for (var k = run.steps.length > 1 ? 1 : 0; k < run.steps.length; k++)
      if (run.steps[k].tokens_per_s !== null && isFinite(run.steps[k].tokens_per_s)) v.push(run.steps[k].tokens_per_s);
    if (!v.length) return NaN;
    v.sort(function (a, b) { return a - b; });
    var h = v.length >> 1;
    return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
  }

  /* the largest rank's peak activation bytes of step s */
  function peakOf(s) {
    var most = NaN;
    for (var k = 0; s && k < s.ranks.length; k++)
      if (isFinite(s.ranks[k].peak_act_bytes)) most = isFinite(most) ? Math.max(most, s.ranks[k].peak_act_bytes) : s.ranks[k].peak_act_bytes;
    return most;
  }
  /* 1F1B's predicted peak and the memory limit (hello's "memory") as marks
   * on a chart of bytes */
  function memMarks(r) {
    var m = r.info.memory || {}, out = [];
    if (m.peak_1f1b_bytes > 0)
      out.push({ name: 'peak-1f1b', value: m.peak_1f1b_bytes, color: '#D55E00', dashed: true,
                 label: '1F1B\u2019s predicted peak ' + bytes(m.peak_1f1b_bytes) });
    if (m.mem_limit_bytes > 0)
      out.push({ name: 'mem-limit', value: m.mem_limit_bytes, color: '#B00020',
                 label: '--mem-limit ' + m.mem_limit + ' (' + bytes(m.mem_limit_bytes) + ')' });
    return out;
  }
  /* "2.01 MiB (0.358x 1F1B)": a run's last peak against 1F1B's */
  function peakText(r, peak) {
    var m = r.info.memory || {};
    if (!isFinite(peak)) return '\u2013';
    return bytes(peak) + (m.peak_1f1b_bytes > 0 ? ' (' + fmt(peak / m.peak_1f1b_bytes, 3) + 'x 1F1B)' : '');
  }
  /* what the schedule costs in time: its predicted period over 1F1B's */
  function priceText(r) {
    var m = r.info.memory || {};
    return m.period_1f1b > 0 && m.predicted_period > 0 ? fmt(m.predicted_period / m.period_1f1b, 3) +
      'x (' + fmt(1e3 * m.predicted_period, 3) + ' / ' + fmt(1e3 * m.period_1f1b, 3) + ' ms)' : '\u2013';
  }

  /* A list of per-stage values, the first 16: "1.25, 1.25, 1.63 MiB". */
  function perStage(v, f) {
    var out = [];
    for (var s = 0; s < v.length && s < 16; s++) out.push(f(v[s]));
    return out.join(', ') + (v.length > 16 ? ', \u2026 (' + v.length + ' stages)' : '');
  }
  /* The run's model memory per stage (config.json) and the costs its latest
   * prediction was calibrated with, per stage: the row under a run in the
   * Now table (data-* hold the numbers). */
  function stageFacts(r) {
    var m = r.info.memory || {}, c = r.tl && r.tl.costs, parts = [], data = '';
    var names = [['stage_act_bytes', 'M_B'], ['stage_wgrad_bytes', 'M_W'], ['stage_transient_bytes', 'transient']];
    for (var k = 0; k < names.length; k++) {
      var v = m[names[k][0]];
      if (!v || !v.length) continue;
      data += ' data-' + names[k][0].replace(/_/g, '-') + '="' + v.join(',') + '"';
      parts.push(names[k][1] + ' ' + perStage(v, bytes));
    }
    var mem = parts.length ? '<span class="stage-memory"' + data + '>model memory per stage: ' +
      parts.join(' \u00b7 ') + '</span>' : '';
    parts = [];
    var ops = [['tf', 'T_F'], ['tb', 'T_B'], ['tw', 'T_W']];
    for (k = 0; c && k < ops.length; k++) {
      var x = c[ops[k][0]];
      if (x === undefined || x === null) continue;
      parts.push(ops[k][1] + ' ' + (x.length !== undefined ? perStage(x, function (t) { return fmt(1e3 * t, 3); })
                                                           : fmt(1e3 * x, 3)) + ' ms');
    }
    var costs = parts.length ? '<span class="stage-costs" data-step="' + r.tl.step + '">costs calibrated on step ' +
      r.tl.step + ': ' + parts.join(' \u00b7 ') + '</span>' : '';
    return mem && costs ? mem + '<br/>' + costs : mem + costs;
  }

  function nowTable() {
    var rows = ['<tr><th>run</th><th>schedule</th><th>step</th><th>loss</th><th>val loss</th>' +
                '<th>tokens/s (steady)</th><th>step time</th><th>bubble measured</th>' +
                '<th>bubble predicted</th><th>peak activations</th><th>step vs 1F1B (predicted)</th>' +
                '<th>state</th></tr>'];
    for (var i = 0; i < runs.length; i++) {
      var r = runs[i], s = last(r), val = null;
      for (var k = r.steps.length - 1; k >= 0 && val === null; k--)
        if (r.steps[k].val_loss !== null) val = r.steps[k].val_loss;
      var pb = r.tl ? 100 * r.tl.predicted.bubble_ratio : NaN;
      /* the prediction is of the rendered step: named when the row shows a later one */
      var pbText = isFinite(pb) ? fmt(pb, 3) + '%' + (s && r.tl.step !== s.step ? ' (step ' +
                   r.tl.step + ')' : '') : '\u2013';
      var lim = r.info.memory && r.info.memory.mem_limit ? ', --mem-limit ' + r.info.memory.mem_limit : '';
      var cells = [r.info.name, r.info.schedule + ' P=' + r.info.p + ' V=' + r.info.v + ' M=' + r.info.m + lim,
                   s ? s.step + (r.info.steps ? ' / ' + r.info.steps : '') : '\u2013',
                   s ? fmt(s.loss) : '\u2013', fmt(val), s ? fmt(steady(r), 3) : '\u2013',
                   s ? fmt(1e3 * s.seconds, 3) + ' ms' : '\u2013',
                   s ? fmt(100 * s.bubble, 3) + '%' : '\u2013', pbText, peakText(r, peakOf(s)),
                   priceText(r),
                   r.ended ? r.ended : r.info.state ? r.info.state : r.info.live ? 'training' : '\u2013'];
      var tr = '<tr><td><span class="swatch" style="background:' + r.color + '"></span>';
      for (var c = 0; c < cells.length; c++)
        tr += (c ? '<td class="' + (c >= 2 && c <= 10 ? 'num' : '') + '">' : '') +
              String(cells[c]).replace(/[&<>]/g, function (ch) {
                return { '&': '&amp;', '<': '&lt;', '>': '&gt;' }[ch];
              }) + '</td>';
      rows.push(tr + '</tr>');
      var more = stageFacts(r);
      if (more) rows.push('<tr class="stage-facts" data-run="' + i + '"><td></td><td colspan="' +
                          (cells.length - 1) + '">' + more + '</td></tr>');
    }
    $('now').innerHTML = '<table>' + rows.join('') + '</table>';
    peaksChart();
  }

  /* Every run's peak activations side by side, 1F1B's on the same model as
   * a thin bar under each */
  function peaksChart() {
    var rows = [], host = $('chart-peaks');
    for (var i = 0; i < runs.length; i++) {
      var r = runs[i], peak = peakOf(last(r)), m = r.info.memory || {};
      if (!isFinite(peak)) continue;
      rows.push({ label: r.info.name, value: peak, text: peakText(r, peak),
                  sub: m.peak_1f1b_bytes > 0 ? m.peak_1f1b_bytes : undefined });
    }
    host.hidden = !rows.length;
    if (rows.length)
      barChart(host, { id: 'live-peaks', width: 720, color: '#009E73',
                       title: 'Peak activation memory of each run (the largest rank, latest step)',
                       note: 'thin grey bar: 1F1B\u2019s predicted peak on the same model' }, rows);
  }

  /* The autopilot's marks: where a fault was first named (red) and where
   * the plan switched (green), for every run on the page. */
  function autopilotEvents() {
    var out = [];
    for (var i = 0; i < runs.length; i++)
      for (var k = 0; k < runs[i].steps.length; k++) {
        var s = runs[i].steps[k], f = s.fault, w = s['switch'];
        var pf = k > 0 ? runs[i].steps[k - 1].fault : null; /* named a step after its onset */
        if (f && !(pf && pf.since === f.since && pf.rank === f.rank && pf.link === f.link))
          out.push({ x: f.since, color: '#D55E00', label: f.rank !== undefined ? 'slow rank ' + f.rank :
                     'slow link ' + f.link, tip: 'from step ' + f.since + ': ' + (f.rank !== undefined ?
                     'rank ' + f.rank + "'s ops x" + fmt(f.factor, 3) : 'link ' + f.link + ' +' +
                     fmt(1e3 * f.delay, 3) + ' ms a message') });
        if (w)
          out.push({ x: s.step - 0.5, color: '#009E73', label: w.kind,
                     tip: 'before step ' + s.step + ': ' + w.kind + ' ' + w.from + ' \u2192 ' + w.to +
                     (w.partition ? ' (layers ' + w.partition + ')' : '') + ', predicted ' +
                     fmt(1e3 * w.predicted_before, 4) + ' \u2192 ' + fmt(1e3 * w.predicted_after, 4) +
                     ' ms a step' });
      }
    return out;
  }

  function curves() {
    var loss = [], tok = [], sec = [], bub = [], events = autopilotEvents();
    for (var i = 0; i < runs.length; i++) {
      var r = runs[i], many = runs.length > 1, lp = [], vp = [], tp = [], sp = [], bp = [];
      for (var k = 0; k < r.steps.length; k++) {
        var s = r.steps[k];
        lp.push([s.step, s.loss === null ? NaN : s.loss]);
        if (s.val_loss !== null) vp.push([s.step, s.val_loss]);
        tp.push([s.step, s.tokens_per_s === null ? NaN : s.tokens_per_s]);
        sp.push([s.step, s.seconds === null ? NaN : 1e3 * s.seconds]);
        bp.push([s.step, s.bubble === null ? NaN : 100 * s.bubble]);
      }
      var name = many ? r.info.name + ' ' : '';
      loss.push({ name: name + 'train', color: r.color, pts: lp, markers: lp.length <= 40 });
      if (vp.length) loss.push({ name: name + 'validation', color: r.color, dashed: true, pts: vp,
                                 markers: true });
      tok.push({ name: many ? r.info.name : null, color: r.color, pts: tp });
      sec.push({ name: many ? r.info.name : null, color: r.color, pts: sp });
      bub.push({ name: name + 'measured', color: r.color, pts: bp });
      var pa = predictedAt(r);
      if (pa.length) bub.push({ name: name + 'predicted', color: r.color, dashed: true, pts: pa });
    }
    var wide = Math.max(600, Math.min(1300, document.documentElement.clientWidth - 80));
    var third = Math.floor((wide - 3 * 18 - 2 * 14) / 3);
    lineChart($('chart-loss'), { id: 'live-loss', title: 'Loss', xLabel: 'step', yLabel: 'loss',
                                 width: wide, height: 260, fitY: true, integerX: true,
                                 events: events }, loss);
    lineChart($('chart-throughput'), { id: 'live-throughput', title: 'Throughput',
                                       xLabel: 'step', yLabel: 'tokens/s', width: third,
                                       height: 220, integerX: true, events: events }, tok);
    lineChart($('chart-step-time'), { id: 'live-step-time', title: 'Step time',
                                      xLabel: 'step', yLabel: 'ms', width: third, height: 220,
                                      integerX: true, events: events }, sec);
    lineChart($('chart-bubble'), { id: 'live-bubble', title: 'Bubble: measured and predicted',
                                   xLabel: 'step', yLabel: '% of P \u00d7 step', width: third,
                                   height: 220, integerX: true }, bub);
  }

  /* One step in both panels: the rendered step (its record, measured, and
   * its prediction) when there is one, else the latest without prediction. */
  function stages(r, i) {
    var s = (r.tl && stepRecord(r, r.tl.step)) || last(r);
    if (!s || !s.ranks.length) return;
    var P = s.ranks.length, sum = 0, k, util = [], mem = [];
    for (k = 0; k < P; k++) sum += s.ranks[k].busy || 0;
    var make = s.bubble < 1 ? sum / (P * (1 - s.bubble)) : NaN;
    var pred = r.tl && r.tl.step === s.step ? r.tl.predicted : null;
    for (k = 0; k < P; k++) {
      var u = 100 * s.ranks[k].busy / make, label = 'rank ' + k + ' \u00b7 stage ' + stagesOf(r, k);
      var pp = pred ? pred.period || pred.makespan : 0;
      var pu = pred && pred.ranks[k] && pp > 0 ? 100 * pred.ranks[k].busy / pp : undefined;
      util.push({ label: label, value: u, sub: pu, text: fmt(u, 3) + '%' +
                  (pu !== undefined ? ' (pred. ' + fmt(pu, 3) + '%)' : '') });
      var m = s.ranks[k].peak_act_bytes;
      mem.push({ label: label, value: m, text: bytes(m) });
    }
    barChart($('util-' + i), { id: 'live-util-' + i, width: 620, color: r.color, max: 100,
                               title: 'Utilisation, step ' + s.step + ' (busy share of the step)',
                               note: pred ? 'thin grey bar: predicted' : null }, util);
    barChart($('mem-' + i), { id: 'live-mem-' + i, width: 560, color: '#009E73',
                              title: 'Peak activation memory, step ' + s.step, marks: memMarks(r) },
             mem);
    idleCauses(s, i);
  }

  function showStep(r, i) {
    var tl = r.tl, box = $('step-' + i);
    if (!tl || !box) return;
    if (r.belt && r.belt.playing) return; /* the replay keeps its chart until it pauses */
    r.shown = tl;
    var old = r.belt, frac = old && old.t > 0 ? old.t / old.d.T : 0;
    if (old) old.remove();
    var ms = function (x) {
      return x < 2e-3 ? fmt(1e6 * x, 3) + ' \u00b5s' : x < 2 ? fmt(1e3 * x, 3) + ' ms' : fmt(x, 3) + ' s';
    };
    var per = function (t) { /* the period (a step as it runs), and one step alone when it differs */
      var p = t.period || t.makespan;
      return 'period ' + ms(p) + (Math.abs(p - t.makespan) > 1e-9 * p ? ' \u00b7 makespan ' + ms(t.makespan) : '');
    };
    $('facts-m-' + i).textContent = 'step ' + tl.step + ': ' + per(tl.measured) +
      ' \u00b7 bubble ' + fmt(100 * tl.measured.bubble_ratio, 3) + '%';
    /* a cost: one value, or the list per stage (as the run report prints it) */
    var cost = function (name, x) {
      if (x === undefined || x === null) return null;
      return name + ' ' + (Array.isArray(x) ? x.map(function (v) { return ms(v); }).join(', ') : ms(x));
    };
    var c = tl.costs, said = c ? [cost('T_F', c.tf), cost('T_B', c.tb), cost('T_W', c.tw),
      cost('T_comm', c.comm), c['send-overhead'] ? cost('send overhead', c['send-overhead']) : null,
      c.tu ? cost('update', c.tu) : null].filter(function (x) { return x; }) : [];
    $('facts-p-' + i).textContent = per(tl.predicted) + ' \u00b7 bubble ' +
      fmt(100 * tl.predicted.bubble_ratio, 3) + '%' + (said.length ? ' (simulator, costs ' +
      'calibrated on a step' + (Array.isArray(c.tf) ? ', per stage' : '') + ': ' +
      said.join(' \u00b7 ') + ')' : '');
    $('gantt-m-' + i).innerHTML = tl.svg_measured;
    $('gantt-p-' + i).innerHTML = tl.svg_predicted;
    var svg = $('gantt-m-' + i).querySelector('svg.gantt');
    r.belt = window.ktBelt ? window.ktBelt(svg) : null;
    if (r.belt && frac > 0) r.belt.set(frac * r.belt.d.T);
    /* the what-if panel under the prediction, the critical path on the measurement */
    if (window.ktWhatIf) window.ktWhatIf.dashboard(r, i, tl, last(r));
  }

  function draw() {
    pending = false;
    draws++;
    nowTable();
    curves();
    for (var i = 0; i < runs.length; i++) {
      stages(runs[i], i);
      if (runs[i].tl && runs[i].tl !== runs[i].shown) showStep(runs[i], i);
    }
    body.setAttribute('data-draws', String(draws));
  }
  function later() {
    if (pending) return;
    pending = true;
    window.setTimeout(function () { window.requestAnimationFrame(draw); }, 250);
  }

  function layout() {
    var html = '';
    for (var i = 0; i < runs.length; i++) {
      var r = runs[i], name = r.info.name.replace(/[&<>]/g, '');
      html += '<div class="run" id="step-' + i + '"><h3><span class="swatch" style="background:' + r.color +
              '"></span>' + name + '</h3><div class="row"><div class="card" id="util-' + i +
              '"></div><div class="card" id="mem-' + i + '"></div><div class="card" id="idle-' + i +
              '" hidden></div></div>' +
              '<div class="head"><h3>measured</h3><span class="facts" id="facts-m-' + i +
              '">waiting for a rendered step</span></div><div class="scroll" id="gantt-m-' + i +
              '"></div><div class="head"><h3>predicted</h3><span class="facts" id="facts-p-' + i +
              '"></span></div><div class="scroll" id="gantt-p-' + i + '"></div></div>';
    }
    $('runs').innerHTML = html;
  }

  function parse(ev) {
    try { return JSON.parse(ev.data); } catch (err) { return null; }
  }
  function state(s) {
    body.setAttribute('data-live', s);
    $('status').textContent = {
      connecting: 'connecting to the run\u2026',
      live: 'live: updating as the run trains',
      finished: 'finished: every run has ended (final state)',
      lost: 'the server went away; showing the last state received'
    }[s];
  }

  /* a test hook: run i as the page holds it (info, steps, tl: the rendered step) */
  window.ktDashboard = { run: function (i) { return runs[i]; },
                         predictedAt: function (i) { return predictedAt(runs[i]); } };

  state('connecting');
  var es = new EventSource('events');
  es.addEventListener('hello', function (ev) {
    var h = parse(ev);
    if (!h) return;
    runs = [];
    received = 0;
    for (var i = 0; i < h.runs.length; i++)
      runs.push({ info: h.runs[i], steps: [], predicted: [], tl: null, shown: null,
                  ended: false, belt: null, color: COLORS[i % COLORS.length] });
    layout();
    state('live');
    failures = 0;
    later();
  });
  es.addEventListener('step', function (ev) {
    var s = parse(ev);
    if (!s || !runs[s.run]) return;
    runs[s.run].steps.push(s);
    body.setAttribute('data-steps', String(++received));
    later();
  });
  es.addEventListener('timeline', function (ev) {
    var t = parse(ev);
    if (!t || !runs[t.run]) return;
    var r = runs[t.run];
    r.tl = t;
    r.predicted.push([t.step, 100 * t.predicted.bubble_ratio]);
    later();
  });
  es.addEventListener('end', function (ev) {
    var e = parse(ev);
    if (!e || !runs[e.run]) return;
    runs[e.run].ended = e.reason || 'finished';
    var all = true;
    for (var i = 0; i < runs.length; i++) all = all && runs[i].ended;
    if (all) { es.close(); state('finished'); }
    later();
  });
  /* the browser retries a broken stream; a server gone for good is given up */
  var failures = 0;
  es.onerror = function () {
    if (++failures >= 3 || es.readyState === EventSource.CLOSED) {
      es.close();
      state('lost');
    } else {
      $('status').textContent = 'connection lost; retrying\u2026';
    }
  };
  window.addEventListener('resize', later);
})();
