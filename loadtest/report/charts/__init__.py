"""The report's charts: what each draws and under which caption (assembly), drawn from cells (cells) and from
answers (answers), in one style (style: one colour per configuration, axes, legends)."""
