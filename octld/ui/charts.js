// The run's two pictures, as SVG built node by node: the plan as a graph (a box per node,
// coloured by state, edges from each dependency, the integration branch last) and the
// timeline (a lane per node, its states as bars over time: a fan-out's parallelism).

import { s, known } from './dom.js';
import { NODE_STATE_SET, layoutGraph, timeline, ticks, fmtTick, fmtDuration, millis } from './model.js';

const BOX_W = 150; const BOX_H = 46; const GAP_X = 60; const GAP_Y = 16; const PAD = 12;
// Top to bottom: boxes side by side in a layer, room for the edges between layers.
const DOWN_GAP_X = 16; const DOWN_GAP_Y = 36;

const cut = (t, n) => (t.length > n ? `${t.slice(0, n - 1)}…` : t);

/**
 * The plan graph. `onSelect(nodeId)` on click or Enter; `selected` is outlined. Layers are
 * columns, left to right, when that fits in `avail` px (none given: always); else they are
 * rows, top to bottom, a layer wrapping at what fits the width, so that nothing is drawn
 * smaller or off to the side of a phone.
 */
export function graphSvg(shown, selected, onSelect, avail = null) {
  const nodes = shown.nodes || [];
  const integration = shown.manifest?.kind === 'orchestrate' ? shown.manifest.settings?.integration : null;
  const extra = integration ? 1 : 0;
  let g = layoutGraph(nodes);
  const across = g.cols + extra;
  const wide = PAD * 2 + across * BOX_W + Math.max(0, across - 1) * GAP_X;
  const down = avail != null && wide > avail;
  let W; let H; let xy; let intXY; let out; let into; let curve;
  if (!down) {
    const rows = Math.max(1, g.rows);
    W = wide;
    H = PAD * 2 + rows * BOX_H + (rows - 1) * GAP_Y;
    xy = ({ col, row }) => [PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y)];
    intXY = [PAD + g.cols * (BOX_W + GAP_X), PAD + ((rows - 1) * (BOX_H + GAP_Y)) / 2];
    out = ([x, y]) => [x + BOX_W, y + BOX_H / 2];
    into = ([x, y]) => [x, y + BOX_H / 2];
    curve = ([x1, y1], [x2, y2]) => { const m = (x1 + x2) / 2; return `M${x1},${y1} C${m},${y1} ${m},${y2} ${x2},${y2}`; };
  } else {
    const per = Math.max(1, Math.floor((avail - PAD * 2 + DOWN_GAP_X) / (BOX_W + DOWN_GAP_X)));
    g = layoutGraph(nodes, per);
    const n = Math.max(1, g.rows);
    const layers = g.cols + extra;
    W = PAD * 2 + n * BOX_W + (n - 1) * DOWN_GAP_X;
    H = PAD * 2 + layers * BOX_H + Math.max(0, layers - 1) * DOWN_GAP_Y;
    // Each row of boxes centred.
    const inRow = [];
    for (const p of g.pos.values()) inRow[p.col] = (inRow[p.col] || 0) + 1;
    xy = ({ col, row }) => [PAD + ((n - inRow[col]) * (BOX_W + DOWN_GAP_X)) / 2 + row * (BOX_W + DOWN_GAP_X), PAD + col * (BOX_H + DOWN_GAP_Y)];
    intXY = [(W - BOX_W) / 2, PAD + g.cols * (BOX_H + DOWN_GAP_Y)];
    out = ([x, y]) => [x + BOX_W / 2, y + BOX_H];
    into = ([x, y]) => [x + BOX_W / 2, y];
    curve = ([x1, y1], [x2, y2]) => { const m = (y1 + y2) / 2; return `M${x1},${y1} C${x1},${m} ${x2},${m} ${x2},${y2}`; };
  }
  const svg = s('svg', { test: 'graph', class: ['graph', down && 'graph-down'].filter(Boolean).join(' '), viewBox: `0 0 ${W} ${H}`,
    width: W, height: H, role: 'img', 'aria-label': `plan: ${nodes.length} nodes` });
  svg.appendChild(s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  const edge = (from, to, cls) => svg.appendChild(s('path', { class: cls, d: curve(out(from), into(to)), 'marker-end': 'url(#arrow)' }));
  for (const [a, b] of g.edges) edge(xy(g.pos.get(a)), xy(g.pos.get(b)), 'edge');
  const box = (x, y, cls, label, sub, tip) => s('g', { class: cls, transform: `translate(${x},${y})` },
    s('title', { text: tip }),
    s('rect', { width: BOX_W, height: BOX_H, rx: 6 }),
    s('text', { x: 10, y: 19, class: 'glabel', text: cut(label, 18) }),
    s('text', { x: 10, y: 36, class: 'gsub', text: cut(sub, 22) }));
  if (integration) {
    for (const id of g.sinks) edge(xy(g.pos.get(id)), intXY, 'edge edge-int');
    const merge = shown.manifest.merge;
    svg.appendChild(box(intXY[0], intXY[1], ['gnode', 'integration', merge && known('state-', merge, NODE_STATE_SET)].join(' '),
      integration, merge ? `integration · ${merge}` : 'integration branch', `integration branch ${integration}`));
  }
  for (const n of nodes) {
    const [x, y] = xy(g.pos.get(n.id));
    const el = box(x, y, ['gnode', known('state-', n.state, NODE_STATE_SET), n.id === selected && 'selected'].filter(Boolean).join(' '),
      n.id, n.state, `${n.id}: ${n.state}${n.task ? `\n${cut(n.task, 300)}` : ''}`);
    el.setAttribute('data-node', n.id);
    el.setAttribute('tabindex', '0');
    el.setAttribute('role', 'button');
    el.setAttribute('aria-label', `node ${n.id}, ${n.state}`);
    el.addEventListener('click', () => onSelect(n.id));
    el.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); onSelect(n.id); } });
    svg.appendChild(el);
  }
  return svg;
}

const LANE_H = 22; const LABEL_W = 110; const AXIS_H = 22;
const TICK_CH = 7; // px per character of a tick's label (11px monospace, rounded up)

/** The timeline of a run's nodes from its events, `width` px wide, ending at `endMs`. */
export function timelineSvg(shown, events, endMs, width, selected, onSelect) {
  const ids = (shown.nodes || []).map((n) => n.id);
  const lanes = timeline(events, ids, endMs);
  const t0 = millis(shown.manifest?.created_at) ?? (events.length ? millis(events[0].ts) : endMs);
  const span = Math.max(1000, endMs - t0);
  const W = Math.max(320, width);
  const plotW = W - LABEL_W - PAD;
  const H = AXIS_H + ids.length * LANE_H + 6;
  const X = (t) => LABEL_W + ((t - t0) / span) * plotW;
  const svg = s('svg', { test: 'timeline', class: 'timeline', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
    'aria-label': `timeline over ${fmtDuration(span / 1000)}` });
  for (const t of ticks(span, Math.max(2, Math.floor(plotW / 70)))) {
    const x = X(t0 + t);
    svg.appendChild(s('line', { class: 'tick', x1: x, x2: x, y1: AXIS_H - 4, y2: H }));
    // A label that would run past the right edge ends at its tick instead.
    const label = fmtTick(t);
    const last = x + 2 + label.length * TICK_CH > W;
    svg.appendChild(s('text', { class: 'ticklabel', x: last ? x - 3 : x + 2, y: AXIS_H - 8, 'text-anchor': last ? 'end' : null, text: label }));
  }
  ids.forEach((id, i) => {
    const y = AXIS_H + i * LANE_H;
    const lane = lanes.get(id);
    const g = s('g', { class: ['lane', id === selected && 'selected'].filter(Boolean).join(' '), 'data-node': id });
    g.appendChild(s('rect', { class: 'lanebg', x: 0, y, width: W, height: LANE_H }));
    g.appendChild(s('text', { class: 'lanelabel', x: 4, y: y + 15, text: cut(id, 14) }));
    for (const b of lane.bars) {
      const x = X(b.from);
      g.appendChild(s('rect', { class: `bar ${known('state-', b.state, NODE_STATE_SET)}`, x, y: y + 4, height: LANE_H - 8, rx: 2,
        width: Math.max(1.5, X(b.to) - x) }, s('title', { text: `${id}: ${b.state} ${fmtDuration((b.to - b.from) / 1000)}` })));
    }
    for (const m of lane.marks) {
      const x = X(m.at);
      g.appendChild(s('path', { class: `mark ${known('state-', m.state, NODE_STATE_SET)}`, d: `M${x},${y + 3} l5,8 l-5,8 l-5,-8 z` },
        s('title', { text: `${id}: ${m.state}` })));
    }
    g.addEventListener('click', () => onSelect(id));
    svg.appendChild(g);
  });
  return svg;
}
