"""Using MobiDFL: command line, GIS export, plots, reports and paper reproductions."""
