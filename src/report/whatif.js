/* The what-if panel: kaiten's own simulator, compiled to WebAssembly
 * (src/web) and carried by the page in base64url (<script
 * type="application/x-kt-wasm" id="kt-wasm">), answers every change in the
 * page, with no network.
 *
 * Each <details class="kt-whatif" data-kt-whatif="{seed}"> under a Gantt
 * becomes a panel when opened: sliders for every stage's T_F, T_B, T_W, the
 * link (latency, bandwidth), a straggler rank, a per-op overhead, P, M,
 * V and the schedule (zb-auto under a memory limit); each change
 * regenerates and re-simulates (kt_web_run) and redraws the Gantt, the
 * bubble, makespan, peak memory per rank and the closed form. The chart
 * shows the critical path (click a bar for its start, end and slack);
 * bars drag to another place in their rank's order, which is validated at
 * once (order, deadlock, memory limit) and exported as kaiten text and
 * PyTorch CSV; diff mode sets two timelines on one axis; "why idle" splits
 * each rank's idle time.
 *
 * Seed (written by src/report/whatif.c): {name, schedule, p, m, v, basis,
 * costs, mem_limit, order, unit, measured}. Test hooks: the panel's
 * data-state (loading, ready, invalid, error), data-makespan, data-runs,
 * and the last change's times in ms: data-ms (from the input event until
 * the page is laid out again), data-ms-work (the re-simulation and the
 * redraw alone), data-ms-sim (the simulator's call, its JSON parsed);
 * data-quick "1" while a slider moves and a searching schedule answered
 * quickly (zb-auto and zbv-auto's quick search; zbv, v-half and v-min as
 * constructed): the full search, kaiten sim's, runs when it is let go;
 * window.ktWhatIf.panels.
 */
(function () {
  var K = window.ktWhatIf = window.ktWhatIf || {};
  var wasm = null, loading = null;
  K.panels = [];
  K.sources = [];

  /* ---- the simulator ------------------------------------------------------ */

  function unbase64(s) {
    var map = {}, abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_', i;
    for (i = 0; i < 64; i++) map[abc.charAt(i)] = i;
    s = s.replace(/[^A-Za-z0-9_-]/g, '');
    var out = new Uint8Array(Math.floor(s.length * 3 / 4)), o = 0, acc = 0, bits = 0;
    for (i = 0; i < s.length; i++) {
      acc = (acc << 6) | map[s.charAt(i)];
      bits += 6;
      if (bits >= 8) { bits -= 8; out[o++] = (acc >> bits) & 255; }
    }
    return out.subarray(0, o);
  }

  K.load = function () {
    if (loading) return loading;
    var el = document.getElementById('kt-wasm'), text = el ? el.textContent : '';
    if (!/[A-Za-z0-9]/.test(text))
      return (loading = Promise.reject(new Error('this page was written by a kaiten built without ' +
        'the in-page simulator (clang for wasm32-wasi; scripts/deps.sh installs it)')));
    var none = function () { return 8; }; /* EBADF: the simulator never prints */
    /* the clock the exact search's time limit reads: nanoseconds since the
     * page loaded, written as a 64-bit integer where the module asks */
    var clock = function (id, precision, at) {
      var ns = BigInt(Math.round(performance.now() * 1e6));
      new DataView(wasm.memory.buffer).setBigUint64(at >>> 0, ns, true);
      return 0;
    };
    loading = WebAssembly.instantiate(unbase64(text), {
      wasi_snapshot_preview1: { fd_close: none, fd_seek: none, fd_write: none,
                                clock_time_get: clock }
    }).then(function (r) {
      wasm = r.instance.exports;
      wasm._initialize();
      return wasm;
    });
    return loading;
  };

  function put(str) {
    var bytes = new TextEncoder().encode(str + '\u0000');
    var p = wasm.kt_web_alloc(bytes.length) >>> 0;
    new Uint8Array(wasm.memory.buffer, p, bytes.length).set(bytes);
    return p;
  }

  /* kt_web_run(args, order) -> its answer, parsed */
  K.call = function (args, order) {
    var pa = put(args), po = order ? put(order) : 0;
    var pr = wasm.kt_web_call(pa, po) >>> 0, n = wasm.kt_web_length() >>> 0;
    var text = new TextDecoder().decode(new Uint8Array(wasm.memory.buffer, pr, n));
    wasm.kt_web_free(pa);
    if (po) wasm.kt_web_free(po);
    return JSON.parse(text);
  };

  /* ---- settings ----------------------------------------------------------- */

  var LISTS = ['tf', 'tb', 'tw', 'mem-act', 'mem-wgrad'];
  /* settings the panel has no control for, passed on as the seed gives
   * them (a run's step end, its ops' scratch): lists, then values */
  var KEPT_LISTS = ['mem-transient', 'tu'], KEPT = ['t-norm', 't-dp', 'tie', 'step-sync'];

  function stateOf(seed) {
    var c = seed.costs || {}, st = { cost: {}, kept: {} }, all = LISTS.concat(KEPT_LISTS);
    for (var i = 0; i < all.length; i++) {
      var x = c[all[i]], dflt = all[i] === 'tf' || all[i] === 'tb' || all[i] === 'tw' ||
                                all[i] === 'mem-act' ? 1 : 0;
      if (Array.isArray(x) && Array.isArray(x[0])) { /* per micro-batch: each stage's mean shown */
        var means = x.map(function (l) { return l.reduce(function (a, y) { return a + y; }, 0) / (l.length || 1); });
        st.cost[all[i]] = { u: means[0], list: means, mb: x.map(function (l) { return l.slice(); }) };
      } else {
        st.cost[all[i]] = Array.isArray(x) ? { u: x[0], list: x.slice() }
          : { u: x === undefined ? dflt : x, list: null };
      }
    }
    for (i = 0; i < KEPT.length; i++) if (c[KEPT[i]] !== undefined) st.kept[KEPT[i]] = c[KEPT[i]];
    st.schedule = seed.schedule || '1f1b';
    st.p = seed.p; st.m = seed.m; st.v = seed.v || 0;
    st.basis = seed.basis === 'stage' ? 'stage' : 'rank';
    st.bw = c['comm-bandwidth'] > 0 ? c['comm-bandwidth'] : Infinity;
    /* per-link hops (a list: link i joins ranks i and i + 1) stay as given
     * until the latency slider moves; the slider shows the slowest */
    st.links = Array.isArray(c.comm) ? c.comm.slice() : null;
    st.lat = isFinite(st.bw) ? c['comm-latency'] || 0
      : st.links ? Math.max.apply(null, st.links) : c.comm || 0;
    st.linksLat = st.lat;
    st.bytes = c['comm-bytes'] > 0 ? c['comm-bytes'] : 1;
    st.sendOv = c['send-overhead'] || 0;
    st.opOv = c['op-overhead'] || 0;
    st.overlap = c.overlap || 0;
    st.limit = seed.mem_limit === null || seed.mem_limit === undefined ? '' : String(seed.mem_limit);
    st.slowRank = -1;
    st.slowF = 1;
    st.slowLink = -1; /* link i: ranks i and i + 1 */
    st.linkD = 0;
    st.onset = 10;
    /* documents of varying length packed into the micro-batches (off: '') */
    st.docs = '';
    st.packing = 'fifo';
    st.mbTokens = 1024;
    st.seed = 1;
    st.order = null;
    return st;
  }

  K.stateOf = stateOf;

  /* a cost as kt_web_run reads it: per micro-batch "a,b;c,d", per stage
   * "a,b", or one value */
  function costArg(c) {
    if (c.mb) return c.mb.map(function (l) { return l.join(','); }).join(';');
    return c.list ? c.list.join(',') : c.u;
  }

  /* the settings as kt_web_run reads them (kaiten sim's flags) */
  K.args = function (st, extra) {
    var a = [];
    if (!st.order) a.push('schedule=' + st.schedule, 'p=' + st.p, 'm=' + st.m, 'v=' + st.v);
    if (st.basis === 'stage') a.push('per-stage=1');
    for (var i = 0; i < LISTS.length; i++) {
      var c = st.cost[LISTS[i]];
      a.push(LISTS[i] + '=' + costArg(c));
    }
    for (i = 0; i < KEPT_LISTS.length; i++) {
      c = st.cost[KEPT_LISTS[i]];
      if (c && (c.list || c.u)) a.push(KEPT_LISTS[i] + '=' + costArg(c));
    }
    for (var k in st.kept) a.push(k + '=' + st.kept[k]);
    if (isFinite(st.bw)) a.push('comm-latency=' + st.lat, 'comm-bytes=' + st.bytes, 'comm-bandwidth=' + st.bw);
    else a.push('comm=' + (st.links && st.lat === st.linksLat ? st.links.join(',') : st.lat));
    a.push('send-overhead=' + st.sendOv, 'op-overhead=' + st.opOv, 'overlap=' + st.overlap);
    /* a limit is for the orders that keep to one, and a held order is checked
     * against it; a generator that keeps to none refuses one (kt_request) */
    var keeps = st.order || /^(zb-auto|zbv-auto|optimal)$/.test(st.schedule);
    if (st.limit !== '' && keeps) a.push('mem-limit=' + st.limit);
    if (st.slowRank >= 0) a.push('slow-rank=' + st.slowRank + ':' + st.slowF);
    if (st.slowLink >= 0) a.push('slow-link=' + st.slowLink + '-' + (st.slowLink + 1) + ':+' + st.linkD);
    if (st.slowRank >= 0 || st.slowLink >= 0) a.push('replan=1'); /* the fault's replay */
    if (st.docs) a.push('doc-lengths=' + st.docs, 'packing=' + st.packing, 'mb-tokens=' + st.mbTokens, 'seed=' + st.seed);
    return a.concat(extra || []).join(' ');
  };

  /* ---- timelines -------------------------------------------------------- */

  /* an answer's simulation as the drawings take it */
  function timeline(res) {
    var s = res.sim;
    return { events: s.events, p: s.p, v: s.v, unit: s.time_unit === 'unit' ? 'cost units' : s.time_unit,
             chunkOf: K.chunker(res.stage_rank), makespan: s.makespan, peak: s.peak_memory,
             span: spanOf(s.events) };
  }
  function spanOf(ev) {
    var hi = 0;
    for (var i = 0; i < ev.length; i++) hi = Math.max(hi, ev[i].end);
    return hi;
  }
  K.timeline = timeline;

  /* The schedule an answer ran, as kaiten text (each rank's actions in the
   * order they ran), with one action moved to index `to` of its rank. */
  K.orderText = function (res, moved, to) {
    var s = res.sim, ev = s.events, ranks = [], i;
    for (i = 0; i < s.p; i++) ranks.push([]);
    for (i = 0; i < ev.length; i++) if (i !== moved) ranks[ev[i].rank].push(i);
    if (moved >= 0) ranks[ev[moved].rank].splice(to, 0, moved);
    var S = res.stage_rank.length, lines = ['# kaiten p=' + s.p + ' v=' + s.v + ' m=' + s.m +
      ' placement=' + s.placement + (S !== s.p * s.v ? ' stages=' + S : '') + ' name=edited'];
    for (var r = 0; r < s.p; r++) {
      var toks = [], k = 0, list = ranks[r];
      while (k < list.length) {
        var e = ev[list[k]], t = e.stage + e.op + e.mb;
        if (e.overlap_next && k + 1 < list.length) {
          var f = ev[list[k + 1]];
          t = '(' + t + ';' + f.stage + f.op + f.mb + ')OVERLAP_F_B';
          k++;
        }
        toks.push(t);
        k++;
      }
      lines.push(toks.join(' '));
    }
    return lines.join('\n') + '\n';
  };

  function sameOrder(a, b) {
    var x = a.split('\n').slice(1).join('\n').trim(), y = b.split('\n').slice(1).join('\n').trim();
    return x === y;
  }

  /* ---- the panel ------------------------------------------------------------ */

  function Panel(host, seed) {
    this.host = host;
    this.seed = seed;
    this.st = stateOf(seed);
    this.first = null;
    this.pinned = null;
    this.res = null;
    this.runs = 0;
    this.diffWith = '';
    host.setAttribute('data-state', 'loading');
    this.box = document.createElement('div');
    this.box.className = 'kt-wi-body';
    host.appendChild(this.box);
    K.panels.push(this);
  }
  K.Panel = Panel;

  Panel.prototype.start = function () {
    var self = this, seed = this.seed;
    return K.load().then(function () {
      if (seed.order && seed.schedule) { /* the report's order: a generator's, or its own */
        var gen = K.call(K.args(self.st));
        if (!gen.ok || !sameOrder(K.orderText(gen, -1, 0), seed.order)) self.st.order = seed.order;
      } else if (seed.order) {
        self.st.order = seed.order;
      }
      self.startOrder = self.st.order;
      K.buildControls(self);
      self.run('start');
      self.first = self.res;
    }).catch(function (err) {
      self.host.setAttribute('data-state', 'error');
      self.box.textContent = String(err && err.message || err);
    });
  };

  /* Re-simulates with the current settings (or a candidate order) and
   * redraws; returns the answer. A candidate that fails validation (or
   * breaks the memory limit) is shown and not kept. */
  Panel.prototype.run = function (why, candidate, quick) {
    var t0 = performance.now(), st = this.st, extra = quick ? ['quick=1'] : [];
    if (candidate && this.res && this.res.mem_limit !== null && st.limit === '')
      extra.push('mem-limit=' + this.res.mem_limit); /* the limit the order was built under */
    var res = K.call(K.args(st, extra), candidate || st.order), t1 = performance.now();
    if (!res.ok && /per-(stage|micro-batch) costs list/.test(res.error) && K.dropLists(this)) {
      /* the new schedule has another number of stages: every stage as given */
      res = K.call(K.args(st, extra), candidate || st.order);
      t1 = performance.now();
    }
    this.runs++;
    this.host.setAttribute('data-runs', String(this.runs));
    var over = res.ok && candidate && res.over_limit.length ? res.over_limit : null;
    if (!res.ok || over) {
      this.showError(res, over);
      this.host.setAttribute('data-state', 'invalid');
    } else {
      if (candidate) st.order = candidate;
      this.res = res;
      this.tl = timeline(res);
      K.render(this);
      this.host.setAttribute('data-state', 'ready');
      this.host.setAttribute('data-makespan', String(res.sim.makespan));
      this.host.setAttribute('data-quick', res.quick ? '1' : '0');
    }
    this.box.offsetHeight; /* lay it out: the time counts until the page can paint */
    var ms = performance.now() - t0;
    this.host.setAttribute('data-ms', ms.toFixed(2));
    this.host.setAttribute('data-ms-work', ms.toFixed(2));
    this.host.setAttribute('data-ms-sim', (t1 - t0).toFixed(2));
    this.last = { why: why, ms: ms, sim: t1 - t0 };
    return res;
  };

  Panel.prototype.showError = function (res, over) {
    var box = this.el.error, text;
    if (over) {
      text = 'over the memory limit ' + K.num(res.mem_limit) + ': ' + over.map(function (o) {
        return 'rank ' + o.rank + ' peaks at ' + K.num(o.peak);
      }).join(', ');
    } else {
      text = res.status + ': ' + res.error;
    }
    box.textContent = text;
    box.hidden = false;
    K.markBlocked(this, over ? null : res.error, over);
  };

  function init(host) {
    if (host.ktPanel) return host.ktPanel;
    var seed;
    try { seed = JSON.parse(host.getAttribute('data-kt-whatif')); } catch (err) { return null; }
    var p = host.ktPanel = new Panel(host, seed);
    p.started = p.start();
    return p;
  }
  K.open = init;

  /* Attaches a panel under an element (the dashboard calls it for each
   * run's predicted step); returns the <details>. */
  K.attach = function (after, seed, open) {
    var d = document.createElement('details');
    d.className = 'kt-whatif';
    d.setAttribute('data-kt-whatif', JSON.stringify(seed));
    d.innerHTML = '<summary>What if\u2026 re-simulate this step in the page</summary>';
    after.parentNode.insertBefore(d, after.nextSibling);
    d.addEventListener('toggle', function () { if (d.open) init(d); });
    if (open) { d.open = true; init(d); }
    return d;
  };

  /* ---- measured steps ------------------------------------------------------ */

  /* a measured step as the drawings take it (events [rank, stage, mb, op,
   * start, end, slack] in the seed) */
  function measuredTimeline(m, p) {
    var ev = m.events.map(function (e) {
      return { rank: e[0], stage: e[1], mb: e[2], op: e[3], start: e[4], end: e[5] };
    });
    var stageRank = [];
    ev.forEach(function (e) { stageRank[e.stage] = e.rank; });
    return { events: ev, p: p, v: 1, unit: 's', chunkOf: K.chunker(stageRank), span: spanOf(ev),
             makespan: m.makespan, peak: NaN, stageRank: stageRank };
  }

  /* The critical path of the measurement on the page's measured Gantt
   * (bars found by rank, stage, micro-batch and op), and a click on a bar
   * there shows its start, end and slack. */
  K.markMeasured = function (seed) {
    var m = seed.measured, svg = m && document.getElementById(m.svg);
    if (!svg || !m.path) return;
    var ev = m.events, bars = {}, rects = svg.querySelectorAll('rect[data-op]:not([data-pred])'), i;
    for (i = 0; i < rects.length; i++) {
      var r = rects[i];
      bars[[r.getAttribute('data-rank'), r.getAttribute('data-stage'), r.getAttribute('data-mb'),
             r.getAttribute('data-op')].join(':')] = r;
    }
    /* the page's bars as a chart for the path's marks */
    var events = ev.map(function (e) { return { rank: e[0] }; }), chart = { tl: { events: events }, box: function (k) {
      var b = bars[ev[k].slice(0, 4).join(':')];
      return b ? { x: +b.getAttribute('x'), y: +b.getAttribute('y'), w: +b.getAttribute('width'),
                   h: +b.getAttribute('height') } : { x: 0, y: 0, w: 0, h: 0 };
    } };
    var path = m.path.filter(function (k) { return !!bars[ev[k].slice(0, 4).join(':')]; });
    var out = [K.pathMarks(chart, path)];
    var old = svg.querySelector('g.kt-wi-measured');
    if (old) old.parentNode.removeChild(old);
    var g = document.createElementNS(svg.namespaceURI, 'g');
    g.setAttribute('class', 'kt-wi-measured');
    g.innerHTML = out.join('');
    svg.appendChild(g);
    var host = svg.parentNode, at = host.parentNode.querySelector('.kt-wi-measured-at');
    if (!at) {
      at = document.createElement('p');
      at.className = 'kt-wi-measured-at';
      at.textContent = 'critical path of the measurement: a line above its bars, an arrow where it changes rank; click a bar for its start, end and slack';
      host.parentNode.insertBefore(at, host.nextSibling);
    }
    svg.onclick = function (e) {
      var t = e.target;
      if (!t || !t.hasAttribute('data-op') || t.hasAttribute('data-pred')) return;
      var key = [t.getAttribute('data-rank'), t.getAttribute('data-stage'), t.getAttribute('data-mb'),
                 t.getAttribute('data-op')].join(':');
      for (var k = 0; k < ev.length; k++)
        if (ev[k].slice(0, 4).join(':') === key) {
          at.setAttribute('data-slack', String(ev[k][6]));
          at.textContent = 'measured: rank ' + ev[k][0] + ' \u00b7 ' + ev[k][1] + ev[k][3] + ev[k][2] +
            ' \u00b7 start ' + K.num(ev[k][4]) + ' s \u00b7 end ' + K.num(ev[k][5]) + ' s \u00b7 slack ' +
            K.num(ev[k][6]) + ' s' + (m.path.indexOf(k) >= 0 ? ' (on the critical path)' : '');
        }
    };
  };

  /* a measured step as a diff source */
  function addMeasured(seed, panel, name) {
    var m = seed.measured;
    if (!m) return;
    var from = { name: name, owner: null, get: function () {
      var tl = measuredTimeline(m, seed.p);
      tl.makespan = tl.span;
      return tl;
    } };
    K.sources.push(from);
    return from;
  }

  /* The dashboard, at each rendered step of run i: the measured step's
   * critical path, and a panel under the prediction seeded with the run's
   * schedule, the costs the prediction ran on and its order, so that the
   * panel starts from the prediction itself. */
  K.dashboard = function (run, i, tl, step) {
    var ev = tl.measured.events, slack = tl.measured_slack || [];
    var seed = { name: run.info.schedule, schedule: run.info.schedule, p: run.info.p, m: run.info.m,
                 v: run.info.v, basis: 'stage', unit: 's', costs: tl.costs || {},
                 measured: { svg: 'gantt-measured-' + tl.run, path: tl.measured_path || [],
                             ranks: step ? step.ranks : [],
                             events: ev.map(function (e, k) {
                               return [e.rank, e.stage, e.mb, e.op, e.start, e.end, slack[k] || 0];
                             }) } };
    var ran = tl.predicted.events.length ? tl.predicted.events : ev;
    var fake = { sim: { events: ran.slice().sort(function (a, b) { return a.rank - b.rank || a.start - b.start; }),
                        p: run.info.p, v: run.info.v, m: run.info.m, placement: 'explicit' }, stage_rank: [] };
    fake.sim.events.forEach(function (e) {
      fake.stage_rank[e.stage] = e.rank;
      fake.sim.m = Math.max(fake.sim.m, e.mb + 1);
    });
    seed.order = K.orderText(fake, -1, 0);
    K.markMeasured(seed);
    var holder = document.getElementById('gantt-p-' + i);
    if (!holder) return;
    if (!run.whatif) {
      run.whatif = K.attach(holder, seed, false);
      run.measuredSource = addMeasured(seed, null, 'run ' + run.info.name + ': measured step');
    } else {
      run.whatif.setAttribute('data-kt-whatif', JSON.stringify(seed));
      if (run.whatif.ktPanel) run.whatif.ktPanel.seed.measured = seed.measured;
    }
    run.measuredSource.get = function () {
      var t = measuredTimeline(seed.measured, seed.p);
      t.makespan = t.span;
      return t;
    };
  };

  function wire() {
    var el = document.getElementById('kt-wasm');
    K.kinds = el ? el.getAttribute('data-kinds') || '' : '';
    var all = document.querySelectorAll('details.kt-whatif[data-kt-whatif]');
    for (var i = 0; i < all.length; i++)
      (function (d) {
        var seed = null;
        try { seed = JSON.parse(d.getAttribute('data-kt-whatif')); } catch (err) { seed = null; }
        if (seed && seed.measured) {
          K.markMeasured(seed);
          addMeasured(seed, null, 'the measured step');
        } else if (seed && seed.schedule) {
          K.sources.push({ name: seed.name, owner: d, get: function () {
            var p = d.ktPanel;
            return p && p.first ? K.timeline(p.first) : originalOf(seed);
          } });
        }
        d.addEventListener('toggle', function () { if (d.open) init(d); });
        if (d.open) init(d);
      })(all[i]);
  }

  /* a page's schedule as first generated, for diffs with panels not opened */
  function originalOf(seed) {
    if (!wasm) return null;
    var res = K.call(K.args(stateOf(seed)));
    return res.ok ? timeline(res) : null;
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', wire);
  else wire();
})();
