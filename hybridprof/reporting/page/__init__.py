"""The HTML and PDF pages: what they show, as plain data (templates only display it), and their
renderers. The report's context (`context`), its layer table (`tree_table`: rows, columns from
`reporting.layer_columns`, the page's data, the PDF's parts), inline-SVG charts (`charts`,
`roofline_chart`, `memory_chart`, `icicle`), the roofline, memory and ranks sections, the diff
page (`diff_context`), the templates and the HTML renderer (`templates`), the PDF renderers
(`pdf`)."""
