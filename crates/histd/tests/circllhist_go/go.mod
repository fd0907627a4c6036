module histd.test/circllhist-decode

go 1.21

require github.com/circonus-labs/circonusllhist v0.1.3
