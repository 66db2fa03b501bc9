/* The what-if panel's controls and views (whatif.js runs the panel,
 * whatif_draw.js draws): the sliders and pickers, the facts line, the
 * Gantt with the critical path and the action clicked, peak memory and why
 * idle per rank, the command that reproduces the answer, the exports, and
 * diff mode.
 */
(function () {
  var K = window.ktWhatIf = window.ktWhatIf || {};
  var esc = K.esc, num = K.num;

  function q(panel, k) { return panel.box.querySelector('[data-k="' + k + '"]'); }

  function range(k, lo, hi, step, value, title) {
    return '<input type="range" data-k="' + k + '" min="' + lo + '" max="' + hi + '" step="' + step +
           '" value="' + value + '" title="' + esc(title) + '"/><input type="number" data-k="' + k +
           '-n" step="any" min="0" value="' + value + '"/>';
  }

  /* slider extents from the seed's values */
  function extent(x) { return x > 0 ? 4 * x : 4; }
  /* what one stage runs (s >= 0), or the uniform value as given (s < 0);
   * v: the schedule's chunks per rank */
  function stageValue(st, key, s, v) {
    var c = st.cost[key];
    if (c.list) return s >= 0 ? c.list[s] : c.u;
    return s >= 0 && st.basis === 'rank' && v > 1 ? c.u / v : c.u;
  }

  K.buildControls = function (panel) {
    var st = panel.st, kinds = (K.kinds || st.schedule).split(', '), i;
    var opts = kinds.map(function (k) {
      return '<option' + (k === st.schedule ? ' selected="selected"' : '') + '>' + esc(k) + '</option>';
    }).join('');
    var tmax = Math.max(st.cost.tf.u, st.cost.tb.u, st.cost.tw.u, 1e-9);
    panel.tmax = extent(tmax);
    panel.box.innerHTML =
      '<div class="kt-wi-controls">' +
      '<label>schedule <select data-k="schedule">' + opts + '</select></label>' +
      '<label>P <input type="number" data-k="p" min="1" max="256" value="' + st.p + '"/></label>' +
      '<label>M ' + range('m', 1, Math.max(256, 2 * st.m), 1, st.m, 'micro-batches') + '</label>' +
      '<label>V <input type="number" data-k="v" min="0" max="8" value="' + st.v + '" title="0: the schedule\'s default"/></label>' +
      '<label>memory limit <input type="text" data-k="limit" size="8" value="' + esc(st.limit) +
      '" placeholder="1F1B\'s" title="zb-auto, zbv-auto: mem-act units (12) or a fraction of 1F1B\'s peak (0.5x)"/></label>' +
      '</div><div class="kt-wi-controls">' +
      '<label>stage <select data-k="stage"><option value="-1">every stage</option></select></label>' +
      '<label>T_F ' + range('tf', 0, panel.tmax, panel.tmax / 400, st.cost.tf.u, 'forward cost') + '</label>' +
      '<label>T_B ' + range('tb', 0, panel.tmax, panel.tmax / 400, st.cost.tb.u, 'input-gradient cost') + '</label>' +
      '<label>T_W ' + range('tw', 0, panel.tmax, panel.tmax / 400, st.cost.tw.u, 'weight-gradient cost') + '</label>' +
      '</div><div class="kt-wi-controls">' +
      '<label>link latency ' + range('lat', 0, extent(Math.max(st.lat, tmax / 4)), extent(Math.max(st.lat, tmax / 4)) / 400, st.lat, 'per message') + '</label>' +
      '<label>bandwidth <input type="range" data-k="bw" min="0" max="100" step="1" value="' +
      (isFinite(st.bw) ? 50 : 100) + '" title="bytes per time unit, log scale; far right: unlimited"/>' +
      '<output data-k="bw-out"></output></label>' +
      '<label>bytes <input type="number" data-k="bytes" min="0" step="any" value="' + st.bytes + '"/></label>' +
      '<label>straggler <select data-k="slow"><option value="-1">none</option></select> \u00d7 ' +
      range('slowF', 0.25, 4, 0.05, 1, 'the straggler\'s compute factor') + '</label>' +
      '<label>per-op overhead ' + range('opOv', 0, tmax, tmax / 400, st.opOv, 'added to every F, B, I, W') + '</label>' +
      '</div><div class="kt-wi-controls">' +
      '<label>slow link <select data-k="slowLink"><option value="-1">none</option></select> + ' +
      range('linkD', 0, extent(tmax * 4), extent(tmax * 4) / 400, st.linkD, 'latency the fault adds to every message on the link') + '</label>' +
      '<label>from step <input type="number" data-k="onset" min="1" step="1" value="' + st.onset +
      '" title="the fault\'s onset: the autopilot names it a step later and its plan runs three steps after that (steps overlap)"/></label>' +
      '</div><div class="kt-wi-controls">' +
      '<label>documents <input type="text" data-k="docs" size="20" value="' + esc(st.docs) +
      '" placeholder="off: lognormal:1:16:1024" title="lognormal:SIGMA:MIN:MAX tokens: documents packed into the micro-batches, each micro-batch costing what its tokens cost (T_F etc. are a full micro-batch\'s)"/></label>' +
      '<label>packing <select data-k="packing"><option' + (st.packing === 'fifo' ? ' selected="selected"' : '') +
      '>fifo</option><option' + (st.packing === 'balanced' ? ' selected="selected"' : '') + '>balanced</option></select></label>' +
      '<label>tokens per micro-batch <input type="number" data-k="mbTokens" min="1" step="1" value="' + st.mbTokens + '"/></label>' +
      '<label>seed <input type="number" data-k="seed" min="0" step="1" value="' + st.seed + '"/></label>' +
      '</div><p class="kt-wi-facts" data-k="replay" hidden="hidden"></p><p class="kt-wi-facts" data-k="facts"></p><p class="kt-wi-error" data-k="error" hidden="hidden"></p>' +
      '<div class="kt-wi-tools"><label><input type="checkbox" data-k="crit" checked="checked"/> critical path</label> ' +
      '<span class="kt-wi-hint">click a bar for its start, end and slack; drag it to another place in its rank\'s order</span> ' +
      '<button type="button" data-k="pin">pin as baseline</button> <label>diff against <select data-k="diff">' +
      '<option value="">(off)</option><option value="original">the original</option></select></label> ' +
      '<button type="button" data-k="reset">reset</button></div>' +
      '<p class="kt-wi-diffline" data-k="diffline" hidden="hidden"></p>' +
      '<div class="scroll" data-k="chart"></div><p class="kt-wi-at" data-k="info"></p>' +
      '<div class="row"><div class="card" data-k="memory"></div><div class="card" data-k="idle"></div>' +
      '<div class="card" data-k="measured-idle" hidden="hidden"></div></div>' +
      '<p class="kt-wi-cmd">the same in a terminal: <code data-k="cmd"></code></p>' +
      '<div class="kt-wi-export"><button type="button" data-k="export">export this order</button>' +
      '<div data-k="exports" hidden="hidden"></div></div>';
    panel.el = { error: q(panel, 'error'), chart: q(panel, 'chart') };
    if (isFinite(st.bw)) q(panel, 'bw').value = String(Math.max(0, Math.min(99, Math.round(12.5 * (Math.log10(st.bw) + 2)))));
    showBandwidth(panel);
    wireControls(panel);
    K.wireChart(panel);
  };

  /* the diff sources: the page's other panels and measured steps */
  function fillDiff(panel) {
    var sel = q(panel, 'diff'), have = {}, i;
    for (i = 0; i < sel.options.length; i++) have[sel.options[i].value] = 1;
    if (panel.pinned && !have.pinned) sel.add(new Option('the pinned result', 'pinned'));
    for (i = 0; i < K.sources.length; i++)
      if (!have['src' + i] && K.sources[i].owner !== panel.host)
        sel.add(new Option(K.sources[i].name, 'src' + i));
  }

  function sizeLists(panel) {
    var S = panel.res ? panel.res.stage_rank.length : 0, sel = q(panel, 'stage'), s;
    if (sel.options.length - 1 !== S) {
      var keep = sel.value;
      sel.innerHTML = '<option value="-1">every stage</option>';
      for (s = 0; s < S; s++) sel.add(new Option('stage ' + s + ' (rank ' + panel.res.stage_rank[s] + ')', String(s)));
      sel.value = +keep < S ? keep : '-1';
    }
    var P = panel.res ? panel.res.sim.p : 0, slow = q(panel, 'slow'), link = q(panel, 'slowLink');
    if (slow.options.length - 1 !== P) {
      slow.innerHTML = '<option value="-1">none</option>';
      for (s = 0; s < P; s++) slow.add(new Option('rank ' + s, String(s)));
      slow.value = String(panel.st.slowRank < P ? panel.st.slowRank : -1);
      link.innerHTML = '<option value="-1">none</option>';
      for (s = 0; s + 1 < P; s++) link.add(new Option(s + '-' + (s + 1), String(s)));
      link.value = String(panel.st.slowLink + 1 < P ? panel.st.slowLink : -1);
    }
  }

  function bwOf(pos) { return pos >= 100 ? Infinity : Math.pow(10, pos / 12.5 - 2); }
  function showBandwidth(panel) {
    var bw = panel.st.bw;
    q(panel, 'bw-out').textContent = isFinite(bw) ? num(bw, 3) + ' bytes per unit' : 'unlimited';
  }

  function showCost(panel) {
    var s = +q(panel, 'stage').value, chunks = panel.res ? panel.res.sim.v : 1;
    ['tf', 'tb', 'tw'].forEach(function (k) {
      var v = stageValue(panel.st, k, s, chunks);
      q(panel, k).value = String(v);
      q(panel, k + '-n').value = String(v);
    });
  }

  /* A cost slider: every stage (the uniform value, kaiten sim's basis) or
   * one stage (a per-stage list of stage values). */
  function setCost(panel, key, value) {
    var st = panel.st, s = +q(panel, 'stage').value, c = st.cost[key];
    c.mb = null; /* an edited cost: its stage values (each micro-batch's were measured) */
    if (s < 0) {
      c.u = value;
      c.list = null;
      return;
    }
    if (!c.list) {
      var S = panel.res.stage_rank.length, per = st.basis === 'rank' ? c.u / panel.res.sim.v : c.u;
      c.list = [];
      for (var i = 0; i < S; i++) c.list.push(per);
    }
    c.list[s] = value;
  }

  /* drops per-stage lists (a schedule with another number of stages) */
  K.dropLists = function (panel) {
    var st = panel.st, dropped = false;
    for (var k in st.cost)
      if (st.cost[k].list || st.cost[k].mb) { st.cost[k].list = st.cost[k].mb = null; dropped = true; }
    return dropped;
  };

  function onChange(panel, k, el, quick) {
    var st = panel.st, v = el.value, x = +v, base = k.replace(/-n$/, '');
    if (k === 'schedule' || k === 'p' || k === 'v' || k === 'm') {
      if (k === 'schedule') {
        st.schedule = v;
        st.v = 0; /* the new schedule's own chunk count */
        q(panel, 'v').value = '0';
      } else if (!(x >= (k === 'v' ? 0 : 1))) return;
      else st[k] = Math.round(x);
      if (k === 'm') q(panel, el.type === 'range' ? 'm-n' : 'm').value = String(st.m);
      if (k === 'p' && st.slowRank >= st.p) st.slowRank = -1;
      if (k === 'p' && st.slowLink + 1 >= st.p) st.slowLink = -1;
      st.order = null; /* a new schedule: any edited order is dropped */
    } else if (base === 'tf' || base === 'tb' || base === 'tw') {
      if (!(x >= 0)) return;
      setCost(panel, base, x);
      q(panel, k === base ? base + '-n' : base).value = v;
    } else if (k === 'stage') {
      showCost(panel);
      return;
    } else if (base === 'lat' || base === 'opOv' || base === 'slowF' || base === 'm' || base === 'linkD') {
      if (!(x >= 0) || (base === 'slowF' && !(x > 0))) return;
      st[base] = x;
      q(panel, k === base ? base + '-n' : base).value = v;
    } else if (k === 'bw') {
      st.bw = bwOf(x);
      showBandwidth(panel);
    } else if (k === 'bytes') {
      if (!(x >= 0)) return;
      st.bytes = x;
    } else if (k === 'slow') {
      st.slowRank = +v;
    } else if (k === 'slowLink') {
      st.slowLink = +v;
    } else if (k === 'onset') {
      if (!(x >= 1)) return;
      st.onset = Math.round(x);
      replay(panel);
      return;
    } else if (k === 'limit') {
      st.limit = v.trim();
    } else if (k === 'docs') {
      st.docs = v.trim();
      if (st.docs) for (var c in st.cost) st.cost[c].mb = null; /* the packing makes each micro-batch's */
    } else if (k === 'packing') {
      st.packing = v;
    } else if (k === 'mbTokens' || k === 'seed') {
      if (!(x >= (k === 'seed' ? 0 : 1))) return;
      st[k] = Math.round(x);
    } else {
      return;
    }
    K.change(panel, k, quick);
  }

  /* One re-simulation per frame, however fast the slider moves; data-ms
   * counts from the first change it answers. While a slider moves (quick)
   * a searching schedule answers from its quick search; letting go runs
   * the full one. */
  K.change = function (panel, why, quick) {
    if (!quick) panel.wantFull = true;
    if (!panel.changedAt) panel.changedAt = performance.now();
    if (panel.pending) return;
    panel.pending = true;
    window.requestAnimationFrame(function () {
      var since = panel.changedAt, full = panel.wantFull;
      panel.changedAt = 0;
      panel.wantFull = false;
      panel.run(why, null, !full);
      panel.pending = false;
      panel.host.setAttribute('data-ms', (performance.now() - since).toFixed(2));
    });
  };

  function wireControls(panel) {
    var inputs = panel.box.querySelectorAll('.kt-wi-controls [data-k]');
    for (var i = 0; i < inputs.length; i++)
      (function (el) {
        var k = el.getAttribute('data-k');
        if (el.tagName === 'SELECT' || el.type === 'text') {
          el.addEventListener('change', function () { onChange(panel, k, el, false); });
          return;
        }
        el.addEventListener('input', function () { onChange(panel, k, el, true); });
        el.addEventListener('change', function () { /* let go: the full search */
          if (panel.pending || panel.host.getAttribute('data-quick') === '1') K.change(panel, k, false);
        });
      })(inputs[i]);
    q(panel, 'crit').addEventListener('change', function () { K.render(panel); });
    q(panel, 'pin').addEventListener('click', function () {
      panel.pinned = panel.tl;
      fillDiff(panel);
    });
    q(panel, 'diff').addEventListener('change', function () {
      panel.diffWith = q(panel, 'diff').value;
      K.render(panel);
    });
    q(panel, 'reset').addEventListener('click', function () { /* back to the report's settings */
      panel.st = K.stateOf(panel.seed);
      panel.st.order = panel.startOrder;
      K.buildControls(panel);
      panel.run('reset');
    });
    q(panel, 'export').addEventListener('click', function () { K.exportOrder(panel); });
  }

  /* ---- views ------------------------------------------------------------- */

  /* A fault replayed (a straggler or a slow link set): the steps before its
   * onset at the order's clean period, then the static order under the
   * fault, then from four steps later (the autopilot names it a step
   * after its onset, and two steps are in flight then) the order zb-auto
   * makes for it. */
  function replay(panel) {
    var f = panel.res && panel.res.fault, el = q(panel, 'replay');
    el.hidden = !f;
    if (!f) return;
    var S = panel.st.onset, rec = f.static > f.clean ? (f.static - f.replanned) / (f.static - f.clean) : NaN;
    el.innerHTML = 'fault replayed: steps 1\u2013' + (S - 1) + ' <b data-k="clean">' + num(f.clean) +
      '</b> a step; from step ' + S + ' the static plan <b data-k="static">' + num(f.static) +
      '</b>; from step ' + (S + 4) + ' re-planned (' + esc(f.schedule) + ' for these costs) <b data-k="replanned">' +
      num(f.replanned) + '</b>' + (isFinite(f.lower_bound) ? ' (lower bound ' + num(f.lower_bound) + ')' : '') +
      (isFinite(rec) ? ': ' + (100 * rec).toFixed(0) + '% of the slowdown recovered' : '');
  }

  function facts(panel) {
    var res = panel.res, s = res.sim, f = panel.first ? panel.first.sim : null, peak = s.peak_memory;
    var t = 'makespan <b data-k="makespan">' + num(s.makespan) + '</b>';
    if (f && f.makespan !== s.makespan) t += ' (' + (s.makespan > f.makespan ? '+' : '') + num(s.makespan - f.makespan) + ')';
    t += ' \u00b7 bubble <b data-k="bubble">' + (100 * s.bubble_ratio).toFixed(2) + '%</b>';
    if (s.closed_form_bubble !== null)
      t += ' (closed form ' + esc(s.closed_form_expr) + ' = <b data-k="closed">' +
           (100 * s.closed_form_bubble).toFixed(2) + '%</b>)';
    else if (s.closed_form_why) t += ' (no closed form: ' + esc(s.closed_form_why) + ')';
    t += ' \u00b7 peak memory <b data-k="peak">' + num(peak) + '</b>';
    if (res.closed_memory !== null) t += ' (form ' + esc(res.closed_memory_expr) + ' = ' + num(res.closed_memory) + ')';
    if (res.mem_limit !== null) t += ' \u00b7 limit ' + num(res.mem_limit);
    t += ' \u00b7 ' + esc(s.schedule || 'edited') + ', P=' + s.p + ' V=' + s.v + ' M=' + s.m;
    if (panel.st.order) t += ' \u00b7 <i>an edited or imported order</i>';
    var pk = s.packing;
    if (pk) t += '<br/>' + esc(pk.packing) + ' packing: <b data-k="documents">' + pk.documents + '</b> documents, <b data-k="step-tokens">' +
      pk.step_tokens + '</b> tokens a step' + (pk.left_out ? ' (' + pk.left_out + ' left out)' : '') +
      ', <b data-k="tokens-per-time">' + num(pk.tokens_per_time, 4) + '</b> tokens per time unit';
    q(panel, 'facts').innerHTML = t;
    replay(panel);
  }

  function bars(panel) {
    var s = panel.res.sim, rows = [], r;
    for (r = 0; r < s.p; r++)
      rows.push({ label: 'rank ' + r, parts: [s.ranks[r].peak_memory], text: num(s.ranks[r].peak_memory, 4) });
    q(panel, 'memory').innerHTML = '<h4>Peak memory per rank</h4>' +
      K.stacked({ width: 420, limit: panel.res.mem_limit || 0, id: 'wi-mem' }, rows, ['peak memory'], ['#009E73']);
    var split = K.idleSplit(s);
    rows = [];
    for (r = 0; r < s.p; r++)
      rows.push({ label: 'rank ' + r, parts: [split[r].busy, split[r].structural, split[r].imbalance],
                  text: (100 * (1 - split[r].busy / s.makespan)).toFixed(1) + '% idle' });
    q(panel, 'idle').innerHTML = '<h4>Why idle (this simulation)</h4>' +
      K.stacked({ width: 520, id: 'wi-idle' }, rows, ['busy', 'structural bubble', 'imbalance'],
                ['#0072B2', '#BBBBBB', '#D55E00']);
    measuredIdle(panel);
  }

  /* The measured step's idle causes, when the run recorded them
   * (ranks[].idle_causes); nothing otherwise. */
  function measuredIdle(panel) {
    var m = panel.seed.measured, box = q(panel, 'measured-idle');
    var ranks = m && m.ranks, rows = [], any = false;
    for (var r = 0; ranks && r < ranks.length; r++) {
      var c = ranks[r].idle_causes;
      if (!c) continue;
      any = true;
      /* the ops' own time ("busy" in runs before it was named apart) */
      var parts = [c.compute !== undefined ? c.compute : c.busy !== undefined ? c.busy : ranks[r].busy];
      for (var j = 0; j < K.CAUSES.length; j++) parts.push(c[K.CAUSES[j]] || 0);
      rows.push({ label: 'rank ' + r, parts: parts });
    }
    box.hidden = !any;
    if (!any) { box.innerHTML = ''; return; }
    box.innerHTML = '<h4>Why idle (the measured step)</h4>' + K.stacked({ width: 520, id: 'wi-measured-idle' },
      rows, ['compute'].concat(K.CAUSES), ['#0072B2', '#BBBBBB', '#CC79A7', '#56B4E9', '#E69F00', '#000000']);
  }
  K.measuredIdle = measuredIdle;

  K.render = function (panel) {
    sizeLists(panel);
    showCost(panel);
    fillDiff(panel);
    panel.el.error.hidden = true;
    facts(panel);
    /* the width is read once: reading it again would lay the page out twice a change */
    if (!panel.width) panel.width = Math.max(900, Math.min(1300, panel.box.clientWidth || 1300));
    var tl = panel.tl, base = K.baseline(panel), width = panel.width;
    var span = Math.max(tl.span, base ? base.span : 0), chart = panel.el.chart;
    chart.innerHTML = '';
    panel.baseChart = null;
    if (base) {
      var d = K.diff(base, tl), pk = tl.peak - base.peak;
      chart.insertAdjacentHTML('beforeend', '<div class="kt-wi-label">' + esc(base.name) + '</div>');
      panel.baseChart = K.chart(chart, base, { width: width, t0: 0, span: span, id: 'wi-base' });
      chart.insertAdjacentHTML('beforeend', '<div class="kt-wi-label">this what-if</div>');
      var line = q(panel, 'diffline');
      line.hidden = false;
      line.innerHTML = 'against ' + esc(base.name) + ': \u0394 makespan <b data-k="dmakespan">' +
        num(tl.makespan - base.makespan) + '</b> \u00b7 \u0394 peak memory <b data-k="dpeak">' + num(pk) +
        '</b> \u00b7 <b data-k="moved">' + d.moved + '</b> of ' + tl.events.length +
        ' actions moved (most: ' + num(d.most) + '; outlined bars moved, thicker further)';
      panel.shift = d.shift;
    } else {
      q(panel, 'diffline').hidden = true;
      panel.shift = null;
    }
    panel.chart = K.chart(chart, tl, { width: width, t0: 0, span: span, shift: panel.shift, id: 'wi-gantt' });
    if (q(panel, 'crit').checked) panel.chart.marks(K.pathMarks(panel.chart, panel.res.path));
    bars(panel);
    q(panel, 'cmd').textContent = panel.res.quick
      ? '(the quick search while the slider moves; let go for the full search, kaiten sim\'s)'
      : 'kaiten sim ' + panel.res.command + (panel.st.order ? ' --from ORDER.txt (export below)' : '');
  };

  /* the timeline diff mode compares with, or null */
  K.baseline = function (panel) {
    var w = panel.diffWith, tl = null;
    if (w === 'original' && panel.first) tl = K.timeline(panel.first), tl.name = 'the original';
    else if (w === 'pinned' && panel.pinned) tl = panel.pinned, tl.name = 'the pinned result';
    else if (w.indexOf('src') === 0 && K.sources[+w.slice(3)]) {
      var from = K.sources[+w.slice(3)];
      tl = from.get();
      if (tl) tl.name = from.name;
    }
    return tl;
  };
})();
