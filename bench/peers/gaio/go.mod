module ringio/bench/peers/gaio

go 1.23

require github.com/xtaci/gaio v1.2.34

require golang.org/x/sys v0.28.0 // indirect
