"""Reports: text and Markdown summaries, plots and the audit report. Nothing below imports this."""
