"""One renderer class per file: a file format of a session (`text`, `html`, `pdf`, `csv`, `json`)
or of a diff (`diff_*`). The registry in `hybridprof.reporting` picks one by extension."""
