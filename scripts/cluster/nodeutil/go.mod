module oversell.local/nodeutil

go 1.26.0
