"""Settings: every option of `flowrate eval` with its layering (command line, environment, config
file, defaults) in `options`, grouped by concern for the layers, and the defaults in `defaults`."""
