// The run's two pictures, as SVG built node by node: the plan as a graph (a box per node,
// coloured by state, edges from each dependency, the integration branch last) and the
// timeline (a lane per node, its states as bars over time: a fan-out's parallelism).

import { s, known } from './dom.js';
import { NODE_STATE_SET, layoutGraph, timeline, ticks, fmtTick, fmtDuration, millis } from './model.js';

const BOX_W = 150; const BOX_H = 46; const GAP_X = 60; const GAP_Y = 16; const PAD = 12;

const cut = (t, n) => (t.length > n ? `${t.slice(0, n - 1)}…` : t);

/** The plan graph. `onSelect(nodeId)` on click or Enter; `selected` is outlined. */
export function graphSvg(shown, selected, onSelect) {
  const nodes = shown.nodes || [];
  const integration = shown.manifest?.kind === 'orchestrate' ? shown.manifest.settings?.integration : null;
  const g = layoutGraph(nodes);
  const cols = g.cols + (integration ? 1 : 0);
  const rows = Math.max(1, g.rows);
  const W = PAD * 2 + cols * BOX_W + Math.max(0, cols - 1) * GAP_X;
  const H = PAD * 2 + rows * BOX_H + (rows - 1) * GAP_Y;
  const xy = ({ col, row }) => [PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y)];
  const svg = s('svg', { test: 'graph', class: 'graph', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
    'aria-label': `plan: ${nodes.length} nodes` });
  svg.appendChild(s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  const edge = (from, to, cls) => {
    const [x1, y1] = from; const [x2, y2] = to;
    const mx = (x1 + x2) / 2;
    svg.appendChild(s('path', { class: cls, d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)' }));
  };
  for (const [a, b] of g.edges) {
    const [ax, ay] = xy(g.pos.get(a)); const [bx, by] = xy(g.pos.get(b));
    edge([ax + BOX_W, ay + BOX_H / 2], [bx, by + BOX_H / 2], 'edge');
  }
  const box = (x, y, cls, label, sub, tip) => s('g', { class: cls, transform: `translate(${x},${y})` },
    s('title', { text: tip }),
    s('rect', { width: BOX_W, height: BOX_H, rx: 6 }),
    s('text', { x: 10, y: 19, class: 'glabel', text: cut(label, 18) }),
    s('text', { x: 10, y: 36, class: 'gsub', text: cut(sub, 22) }));
  if (integration) {
    const [ix, iy] = [PAD + g.cols * (BOX_W + GAP_X), PAD + ((rows - 1) * (BOX_H + GAP_Y)) / 2];
    for (const id of g.sinks) {
      const [ax, ay] = xy(g.pos.get(id));
      edge([ax + BOX_W, ay + BOX_H / 2], [ix, iy + BOX_H / 2], 'edge edge-int');
    }
    const merge = shown.manifest.merge;
    svg.appendChild(box(ix, iy, ['gnode', 'integration', merge && known('state-', merge, NODE_STATE_SET)].join(' '),
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
    svg.appendChild(s('text', { class: 'ticklabel', x: x + 2, y: AXIS_H - 8, text: fmtTick(t) }));
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
