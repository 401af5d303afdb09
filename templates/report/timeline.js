// nsdiag report: the timeline's bars, merged again for the pixel of the range on screen, so that
// zooming in splits a bar where its activities have gaps, each as thick as the share of it they
// fill (the segments and the merge in Python: render/timeline_zoom.py).
(function () {
  "use strict";

  var UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"]];

  function time(ns) {  // fmt.time_ns: 3 significant digits
    for (var i = 0; i < UNITS.length; i++) {
      if (Math.abs(ns) >= UNITS[i][0]) { return +(ns / UNITS[i][0]).toPrecision(3) + " " + UNITS[i][1]; }
    }
    return +ns.toPrecision(3) + " ns";
  }

  // One lane's segments, start deltas made absolute: [lane, start, end, count, busy, name].
  function decode(row) {
    var start = [], end = [], at = 0;
    for (var i = 0; i < row[1].length; i++) {
      at += row[1][i];
      start.push(at);
      end.push(at + row[2][i]);
    }
    var busy = row[4].map(function (b, i) { return row[3][i] > 1 ? b : row[2][i]; });
    return { lane: row[0], start: start, end: end, count: row[3], busy: busy, name: row[5] };
  }

  // timeline_zoom.bars (kept in step): a bar breaks after a gap wider than `gap`, at each bin
  // of `bin` gaps (a merged bar spans a few pixels, its thickness their busy share) and around
  // a segment longer than `wide` gaps.
  function merge(lane, gap, meta, out) {
    var cur = null, prevWide = false, size = meta.bin * gap;
    for (var i = 0; i < lane.start.length; i++) {
      var isWide = lane.end[i] - lane.start[i] > meta.wide * gap;
      var box = size > 0 ? Math.floor(lane.start[i] / size) : null;
      if (cur && box !== null && box === cur.box && lane.start[i] <= cur.reach + gap &&
          !isWide && !prevWide) {
        cur.reach = Math.max(cur.reach, lane.end[i]);
        cur.count += lane.count[i];
        cur.busy += lane.busy[i];
        if (lane.busy[i] > cur.longest) { cur.longest = lane.busy[i]; cur.name = lane.name[i]; }
      } else {
        if (cur) { out.push(cur); }
        cur = { lane: lane.lane, start: lane.start[i], reach: lane.end[i], count: lane.count[i],
                busy: lane.busy[i], longest: lane.busy[i], name: lane.name[i], box: box };
      }
      prevWide = isWide;
    }
    if (cur) { out.push(cur); }
  }

  // timeline_zoom.thickness: the share of its extent a bar's activities fill, in lane units.
  function share(bar) {
    var extent = bar.reach - bar.start;
    return bar.count > 1 && extent > 0 ? Math.min(bar.busy / extent, 1) : 1;
  }

  function thickness(bar, meta) {
    return +(meta.full * Math.max(share(bar), meta.least)).toFixed(3);
  }

  function percent(f) {  // fmt.share(f, 0)
    return f > 0 && f < 0.01 ? "<1%" : (f * 100).toFixed(0) + "%";
  }

  function hover(bar, meta, step) {
    var name = meta.names[bar.name];
    var when = "at " + (bar.start * step / 1e6).toFixed(3) + " ms, " + time((bar.reach - bar.start) * step);
    if (bar.count === 1) { return "<b>" + name + "</b><br>" + when; }
    // Busy time in the payload's steps: activities shorter than half a step in all read 0.
    var busy = bar.busy > 0 ? time(bar.busy * step) : "under " + time(step);
    var of = bar.reach > bar.start && bar.busy > 0 ? " (" + percent(share(bar)) + " of it)" : "";
    return "<b>" + bar.count + " activities</b> merged (longest: " + name + ")<br>" + when +
      ", busy " + busy + of;
  }

  function attach(gd) {
    var meta = gd.layout.meta.nsdiagTimeline;
    var step = meta.unit;
    var traces = Object.keys(meta.bars).map(Number);
    var lanes = traces.map(function (t) { return meta.bars[t].map(decode); });
    var last = "";
    function draw() {
      var axis = gd._fullLayout && gd._fullLayout.xaxis2;
      if (!axis || !axis.range || !axis._length) { return; }
      var range = axis.range.map(Number);
      var key = range.join(",") + "/" + axis._length;
      if (key === last) { return; }
      last = key;
      var gap = Math.max((range[1] - range[0]) * 1e6 / step / axis._length, 0);
      // Each bar trace t, then its hover trace t + 1 (timeline_chart._add_hover_bars): the
      // bars again, the lane's full thickness and transparent, with the hover text.
      var update = { base: [], x: [], y: [], width: [], hovertext: [], text: [] };
      var targets = [], drawn = 0;
      traces.forEach(function (t, k) {
        var bars = [];
        lanes[k].forEach(function (lane) { merge(lane, gap, meta, bars); });
        var nvtx = gd.data[t].name === "nvtx";
        var base = bars.map(function (b) { return b.start * step / 1e6; });
        var x = bars.map(function (b) { return (b.reach - b.start) * step / 1e6; });
        var y = bars.map(function (b) { return meta.lanes[b.lane]; });
        targets.push(t, t + 1);
        update.base.push(base, base.slice());
        update.x.push(x, x.slice());
        update.y.push(y, y.slice());
        update.width.push(bars.map(function (b) { return thickness(b, meta); }), meta.full);
        update.hovertext.push([], bars.map(function (b) { return hover(b, meta, step); }));
        update.text.push(nvtx ? bars.map(function (b) { return meta.names[b.name]; }) : [], []);
        drawn += bars.length;
      });
      window.Plotly.restyle(gd, update, targets);
      gd.setAttribute("data-bars", drawn);
    }
    gd.on("plotly_relayout", draw);
    draw();
  }

  if (!window.Plotly) { return; }
  Array.prototype.forEach.call(document.querySelectorAll(".js-plotly-plot"), function (gd) {
    if (gd.layout && gd.layout.meta && gd.layout.meta.nsdiagTimeline) { attach(gd); }
  });
})();
