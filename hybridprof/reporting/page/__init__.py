"""What the HTML and PDF pages show, as plain data (templates only display it): the report's
context (`context`), the layer table's columns (`columns`), inline-SVG charts (`charts`,
`roofline_chart`), the roofline and rank sections, the diff page's context, and the templates."""
