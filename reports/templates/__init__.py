"""Jinja2 templates and static assets of the HTML/PDF report (shipped as hybridprof._templates)."""
