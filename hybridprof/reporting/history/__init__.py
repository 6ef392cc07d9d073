"""The views of a layer history (`hybridprof history show`): the terminal's lines with a
sparkline per layer, and the page (HTML, PDF) with a small time series per layer, its change
points marked, and a differential icicle between two commits."""
