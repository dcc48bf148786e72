// GET /dashboard: a live page of what glassbox serve is doing, one self-contained HTML file (no
// CDN, no external request) whose script reads /dashboard/metrics (the metrics port's text) and
// /v2/models/NAME/versions/V/monitor every 2 seconds and draws, per model version: requests per
// second, P50/P99 latency (from the histogram's increase), failures by reason, pending requests,
// batch size, inputs outside the training range, drift per feature, confidence, predicted class
// share and alarms. Every number it shows carries data-series (the exposition line's series) and
// data-value (the value as /metrics wrote it), so a test can hold the page to /metrics.
#pragma once

#include <string>

namespace glassbox::serve {

const std::string& dashboard_html();

}  // namespace glassbox::serve
