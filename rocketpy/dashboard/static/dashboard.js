// rocketpy dashboard: live line charts (inline SVG, no library) and the "Go back" links.
// A figure with data-chart-url polls that JSON ({"time": ms, "series": {name: number}}) every 2 s and
// draws the last 60 points of each series. Only textContent and SVG attributes are set: no HTML
// is ever parsed from data.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fdf", "#e0663a", "#2ba36b", "#9a4fd0", "#c9a227", "#4aa3c9", "#d0447a", "#666"];
  const POINTS = 60, PERIOD_MS = 2000, W = 600, H = 200, PAD = 34;

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const k in attrs) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }

  function draw(fig, history) {
    const names = Object.keys(history.series);
    let max = 1;
    for (const n of names) for (const v of history.series[n]) if (v > max) max = v;
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
    el("line", { x1: PAD, y1: H - PAD / 2, x2: W, y2: H - PAD / 2, stroke: "#bbb" }, svg);
    const top = el("text", { x: 2, y: 12, "font-size": 11, fill: "#555" }, svg);
    top.textContent = max.toFixed(max < 10 ? 1 : 0) + " " + (fig.dataset.unit || "");
    const zero = el("text", { x: 2, y: H - PAD / 2, "font-size": 11, fill: "#555" }, svg);
    zero.textContent = "0";
    names.forEach((n, i) => {
      const vals = history.series[n];
      const step = (W - PAD) / (POINTS - 1);
      const pts = vals.map((v, j) => {
        const x = PAD + (POINTS - vals.length + j) * step;
        const y = H - PAD / 2 - (v / max) * (H - PAD);
        return x.toFixed(1) + "," + y.toFixed(1);
      });
      el("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2 }, svg);
    });
    const legend = document.createElement("div");
    legend.className = "legend";
    names.forEach((n, i) => {
      const s = document.createElement("span");
      const sw = document.createElement("i");
      sw.style.background = COLORS[i % COLORS.length];
      s.appendChild(sw);
      const vals = history.series[n];
      s.appendChild(document.createTextNode(n + ": " + vals[vals.length - 1]));
      legend.appendChild(s);
    });
    fig.replaceChildren(svg, legend);
    fig.dataset.points = String(history.count);
  }

  function chart(fig) {
    const history = { series: {}, count: 0 };
    async function poll() {
      try {
        const resp = await fetch(fig.dataset.chartUrl, { headers: { Accept: "application/json" } });
        if (resp.ok) {
          const doc = await resp.json();
          history.count += 1;
          for (const n in doc.series) {
            const vals = history.series[n] || (history.series[n] = []);
            vals.push(Number(doc.series[n]) || 0);
            if (vals.length > POINTS) vals.shift();
          }
          draw(fig, history);
        }
      } catch (e) { /* the next poll tries again */ }
      setTimeout(poll, PERIOD_MS);
    }
    poll();
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("figure[data-chart-url]").forEach(chart);
    document.querySelectorAll("a[data-back]").forEach((a) => a.addEventListener("click", (ev) => {
      if (history.length > 1) { ev.preventDefault(); history.back(); }
    }));
  });
})();
