/* The conveyor belt: an animated replay of a Gantt chart.
 *
 * For every detailed Gantt (svg.gantt[data-mode=detail]) it adds, above the
 * chart, play/pause/step buttons and a time slider, and a belt panel: one
 * station per rank showing the action it runs at the cursor, the
 * micro-batches it holds (forward done, last backward not yet ended) as
 * plates, and the activation memory it holds; plates in transit between
 * ranks ride the belt, forward activations on the top lane and input
 * gradients on the bottom lane. A counter shows the bubble so far: the idle
 * share of P x the time elapsed. The chart itself is untouched, so without
 * script the page reads as before.
 *
 * Times come from the bars: x = x0 + (t - t0) * ppu (attributes of the svg).
 * Memory comes from <metadata class="kt-mem"> when the chart has it (JSON:
 * unit, divisor, per rank [t, v, t, v, ...] with t from the chart's start),
 * else from the plates (in micro-batch activations).
 * window.ktBelt(svg) attaches a belt and returns it (the live page calls it
 * for each new chart).
 */
(function () {
  var OPS = { F: '#0072B2', B: '#E69F00', I: '#CC79A7', W: '#009E73' };

  function el(ns, name, attrs, parent) {
    var e = ns ? document.createElementNS(ns, name) : document.createElement(name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) { return String(+v.toPrecision(3)); }
  function bytes(v) {
    var u = ['B', 'KiB', 'MiB', 'GiB'], i = 0;
    while (Math.abs(v) >= 1024 && i < 3) { v /= 1024; i++; }
    return fmt(v) + ' ' + u[i];
  }
  /* index of the last item with key(item) <= t, -1 when none */
  function last(arr, t, key) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (key(arr, mid) <= t) lo = mid + 1; else hi = mid; }
    return lo - 1;
  }

  function read(svg) {
    var x0 = +svg.getAttribute('data-x0'), ppu = +svg.getAttribute('data-ppu');
    var P = +svg.getAttribute('data-p'), ranks = [], keys = {}, S = 0, T = 0, times = [0];
    for (var r = 0; r < P; r++) ranks.push([]);
    var rects = svg.querySelectorAll('g.bars rect[data-mb]');
    for (var i = 0; i < rects.length; i++) {
      var e = rects[i], a = (+e.getAttribute('x') - x0) / ppu;
      var act = { r: +e.getAttribute('data-rank'), s: +e.getAttribute('data-stage'),
                  mb: +e.getAttribute('data-mb'), op: e.getAttribute('data-op'), a: a,
                  z: a + (+e.getAttribute('width')) / ppu, el: e };
      if (!(act.r >= 0 && act.r < P)) continue;
      ranks[act.r].push(act);
      if (act.s + 1 > S) S = act.s + 1;
      if (act.z > T) T = act.z;
      times.push(act.a, act.z);
      var k = act.s + ':' + act.mb, rec = keys[k] || (keys[k] = { s: act.s, mb: act.mb });
      if (act.op === 'F') rec.F = act;
      else if (act.op === 'B' || act.op === 'I') rec.G = act;
      if (act.op !== 'F' && (!rec.done || act.z > rec.done)) rec.done = act.z;
    }
    for (r = 0; r < P; r++) {
      var list = ranks[r].sort(function (p, q) { return p.a - q.a; }), sum = 0;
      for (i = 0; i < list.length; i++) { list[i].before = sum; sum += list[i].z - list[i].a; }
    }
    times.sort(function (p, q) { return p - q; });
    var mem = null, meta = svg.querySelector('metadata.kt-mem');
    if (meta) { try { mem = JSON.parse(meta.textContent); } catch (err) { mem = null; } }
    var recs = [];
    for (k in keys) recs.push(keys[k]);
    return { P: P, S: S, T: T > 0 && isFinite(T) ? T : 1, ranks: ranks, recs: recs, keys: keys, times: times,
             mem: mem, scale: +svg.getAttribute('data-tscale') || 1,
             unit: svg.getAttribute('data-tunit') || '' };
  }

  function Belt(svg) {
    var d = read(svg), ns = svg.namespaceURI, self = this;
    this.svg = svg;
    this.d = d;
    this.t = 0;
    this.playing = false;
    var host = svg.parentNode && svg.parentNode.className === 'scroll' ? svg.parentNode : svg;
    var box = el(null, 'div', { 'class': 'kt-belt' });
    host.parentNode.insertBefore(box, host);
    this.box = box;
    var bar = el(null, 'div', { 'class': 'kt-controls' }, box);
    function button(text, title, fn) {
      var b = el(null, 'button', { type: 'button', title: title }, bar);
      b.textContent = text;
      b.addEventListener('click', fn);
      return b;
    }
    button('\u21e4 start', 'back to the start', function () { self.pause(); self.set(0); });
    button('\u25c0', 'previous event', function () { self.pause(); self.step(-1); });
    this.playButton = button('\u25b6 play', 'play / pause', function () { self.toggle(); });
    button('\u25b6', 'next event', function () { self.pause(); self.step(1); });
    this.slider = el(null, 'input', { type: 'range', min: '0', max: '1000', step: '1', value: '0',
                                      'aria-label': 'time' }, bar);
    this.slider.addEventListener('input', function () {
      self.pause();
      self.set(d.T * self.slider.value / 1000);
    });
    this.readout = el(null, 'span', { 'class': 'kt-read' }, bar);
    this.drawBelt(ns, box, +svg.getAttribute('width') || 900);
    this.cursor = el(ns, 'line', { 'class': 'kt-cursor', stroke: '#D55E00', 'stroke-width': '1.5',
                                   y1: '22', y2: String(+svg.getAttribute('height') - 40),
                                   'pointer-events': 'none' }, svg);
    this.now = [];
    this.set(0);
  }

  Belt.prototype.drawBelt = function (ns, box, width) {
    var d = this.d, P = d.P, W = Math.max(420, Math.min(width, 150 * P + 90));
    var L = 74, dx = (W - L - 16) / P, H = 132;
    var g = el(ns, 'svg', { 'class': 'kt-belt-panel', width: W, height: H,
                            viewBox: '0 0 ' + W + ' ' + H, 'font-size': '11' }, box);
    el(ns, 'rect', { x: L - 14, y: 8, width: W - L + 4, height: 116, rx: 22,
                     fill: 'none', stroke: '#C9CED4', 'stroke-width': '10' }, g);
    var lab = el(ns, 'text', { x: 4, y: 16, fill: '#555555' }, g);
    lab.textContent = 'forward \u2192';
    lab = el(ns, 'text', { x: 4, y: 127, fill: '#555555' }, g);
    lab.textContent = '\u2190 backward';
    this.cx = [];
    this.st = [];
    for (var r = 0; r < P; r++) {
      var cx = L + dx * (r + 0.5), w = Math.min(dx - 10, 140);
      this.cx.push(cx);
      var s = {};
      el(ns, 'rect', { x: cx - w / 2, y: 24, width: w, height: 84, rx: 5, fill: '#FFFFFF',
                       stroke: '#BBBBBB' }, g);
      var t = el(ns, 'text', { x: cx - w / 2 + 5, y: 37, fill: '#555555' }, g);
      t.textContent = 'rank ' + r;
      s.op = el(ns, 'rect', { x: cx + w / 2 - 37, y: 27, width: 32, height: 15, rx: 3,
                              fill: '#F1F1F1' }, g);
      s.opText = el(ns, 'text', { x: cx + w / 2 - 21, y: 38, 'text-anchor': 'middle',
                                  'font-weight': 'bold' }, g);
      s.plates = el(ns, 'g', {}, g);
      s.mem = el(ns, 'text', { x: cx - w / 2 + 5, y: 102, fill: '#333333' }, g);
      s.w = w;
      this.st.push(s);
    }
    this.moving = el(ns, 'g', {}, g);
    this.ns = ns;
  };

  function plate(ns, parent, x, y, r, fill, label) {
    el(ns, 'circle', { cx: x, cy: y, r: r, fill: fill, stroke: '#FFFFFF', 'stroke-width': '1' },
       parent);
    var t = el(ns, 'text', { x: x, y: y + 3.5, 'text-anchor': 'middle', 'font-size': '9.5',
                             fill: fill === OPS.B ? '#000000' : '#FFFFFF' }, parent);
    t.textContent = label;
  }

  function clear(g) { while (g.firstChild) g.removeChild(g.firstChild); }

  Belt.prototype.set = function (t) {
    var d = this.d, ns = this.ns, P = d.P, busy = 0, running = 0;
    t = Math.max(0, Math.min(t, d.T));
    this.t = t;
    var x = (+this.svg.getAttribute('data-x0')) + t * (+this.svg.getAttribute('data-ppu'));
    this.cursor.setAttribute('x1', x);
    this.cursor.setAttribute('x2', x);
    for (var i = 0; i < this.now.length; i++) this.now[i].classList.remove('kt-now');
    this.now = [];
    var held = [];
    for (var r = 0; r < P; r++) {
      var list = d.ranks[r], k = last(list, t, function (a, m) { return a[m].a; });
      var s = this.st[r], cur = k >= 0 && t < list[k].z ? list[k] : null;
      if (k >= 0) busy += list[k].before + Math.min(t, list[k].z) - list[k].a;
      if (cur) {
        running++;
        cur.el.classList.add('kt-now');
        this.now.push(cur.el);
        s.op.setAttribute('fill', OPS[cur.op] || '#999999');
        s.opText.setAttribute('fill', cur.op === 'B' ? '#000000' : '#FFFFFF');
        s.opText.textContent = cur.op + cur.mb;
      } else {
        s.op.setAttribute('fill', '#F1F1F1');
        s.opText.setAttribute('fill', '#777777');
        s.opText.textContent = 'idle';
      }
      held.push([]);
    }
    clear(this.moving);
    for (i = 0; i < d.recs.length; i++) {
      var rec = d.recs[i];
      if (!rec.F) continue;
      if (rec.F.a <= t && !(rec.done <= t)) held[rec.F.r].push(rec);
      var next = d.keys[(rec.s + 1) + ':' + rec.mb], prev = d.keys[(rec.s - 1) + ':' + rec.mb];
      if (next && next.F && next.F.r !== rec.F.r && rec.F.z <= t && t < next.F.a)
        this.ride(rec.F.r, next.F.r, (t - rec.F.z) / (next.F.a - rec.F.z), 8, OPS.F, rec.mb);
      if (rec.G && prev && prev.G && prev.G.r !== rec.G.r && rec.G.z <= t && t < prev.G.a)
        this.ride(rec.G.r, prev.G.r, (t - rec.G.z) / (prev.G.a - rec.G.z), 124, OPS.B, rec.mb);
    }
    for (r = 0; r < P; r++) this.station(r, held[r], t);
    var el2 = t > 0 ? 1 - busy / (P * t) : 0;
    this.readout.textContent = 't = ' + fmt(t * d.scale) + ' of ' + fmt(d.T * d.scale) + ' ' +
      d.unit + ' \u00b7 ' + running + ' of ' + P + ' ranks busy \u00b7 bubble so far ' +
      (100 * el2).toFixed(1) + '%';
    this.slider.value = String(Math.round(1000 * t / d.T));
  };

  /* a plate on a lane, going from rank a's station to rank b's */
  Belt.prototype.ride = function (a, b, f, y, fill, mb) {
    var x = this.cx[a] + (this.cx[b] - this.cx[a]) * Math.max(0, Math.min(1, f));
    plate(this.ns, this.moving, x, y, 7.5, fill, mb);
  };

  Belt.prototype.station = function (r, held, t) {
    var s = this.st[r], d = this.d, cx = this.cx[r], per = Math.max(1, Math.floor((s.w - 10) / 17));
    clear(s.plates);
    held.sort(function (p, q) { return p.F.a - q.F.a; });
    var shown = Math.min(held.length, 2 * per);
    for (var i = 0; i < shown; i++) {
      var h = held[i], wgrad = h.G && h.G.z <= t;
      if (i === shown - 1 && held.length > shown) {
        var more = el(this.ns, 'text', { x: cx - s.w / 2 + 13 + 17 * (i % per),
                                         y: 60 + 18 * Math.floor(i / per), fill: '#333333',
                                         'text-anchor': 'middle' }, s.plates);
        more.textContent = '+' + (held.length - shown + 1);
        break;
      }
      plate(this.ns, s.plates, cx - s.w / 2 + 13 + 17 * (i % per), 56 + 18 * Math.floor(i / per),
            7.5, wgrad ? OPS.I : OPS.F, h.mb);
    }
    var text = held.length + ' in flight';
    if (d.mem && d.mem.ranks && d.mem.ranks[r]) {
      var m = d.mem.ranks[r], lo = 0, hi = m.length >> 1, v = 0;
      while (lo < hi) {
        var mid = (lo + hi) >> 1;
        if (m[2 * mid] <= t) lo = mid + 1; else hi = mid;
      }
      if (lo > 0) v = m[2 * lo - 1];
      text += ' \u00b7 ' + (d.mem.unit === 'B' ? bytes(v) : fmt(v) + ' ' + d.mem.unit);
    }
    s.mem.textContent = text;
  };

  Belt.prototype.step = function (dir) {
    var ts = this.d.times, t = this.t, i;
    if (dir > 0) { for (i = 0; i < ts.length && ts[i] <= t + 1e-12 * this.d.T; i++); }
    else { for (i = ts.length - 1; i >= 0 && ts[i] >= t - 1e-12 * this.d.T; i--); }
    if (i >= 0 && i < ts.length) this.set(ts[i]);
  };

  Belt.prototype.toggle = function () { if (this.playing) this.pause(); else this.play(); };
  Belt.prototype.pause = function () {
    this.playing = false;
    this.playButton.textContent = '\u25b6 play';
  };
  Belt.prototype.play = function () {
    var self = this, prev = null, secs = Math.min(20, Math.max(6, this.d.times.length / 40));
    if (this.t >= this.d.T) this.set(0);
    this.playing = true;
    this.playButton.textContent = '\u2016 pause';
    function frame(now) {
      if (!self.playing) return;
      if (prev !== null) self.set(self.t + self.d.T * (now - prev) / 1000 / secs);
      prev = now;
      if (self.t >= self.d.T) { self.pause(); return; }
      window.requestAnimationFrame(frame);
    }
    window.requestAnimationFrame(frame);
  };
  Belt.prototype.remove = function () {
    this.pause();
    for (var i = 0; i < this.now.length; i++) this.now[i].classList.remove('kt-now');
    if (this.box.parentNode) this.box.parentNode.removeChild(this.box);
    if (this.cursor.parentNode) this.cursor.parentNode.removeChild(this.cursor);
  };

  window.ktBelt = function (svg) {
    if (!svg || svg.getAttribute('data-mode') !== 'detail') return null;
    if (!svg.querySelector('g.bars rect[data-mb]')) return null;
    /* a chart no renderer of ours writes (no scale, absurd rank count): no belt */
    var ppu = +svg.getAttribute('data-ppu'), P = +svg.getAttribute('data-p');
    if (!(ppu > 0 && isFinite(ppu)) || !(P >= 1 && P <= 4096)) return null;
    return new Belt(svg);
  };
  var all = document.querySelectorAll('svg.gantt[data-mode="detail"]');
  for (var i = 0; i < all.length; i++) window.ktBelt(all[i]);
})();
