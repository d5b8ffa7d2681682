'use strict';
// The traces the dashboard draws (static/dashboard.js): scatter (in Plotly's core), scattergl for studies of more
// than 2,000 trials, bar (knob importance) and parcoords (knobs against the objective). A trace type added to the
// page must be added here, or Plotly draws nothing for it (tests/unit/test_dashboard.py checks the list).
var Plotly = require('plotly.js/lib/core');

Plotly.register([
    require('plotly.js/lib/scattergl'),
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/parcoords'),
]);

module.exports = Plotly;
