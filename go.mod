module github.com/gorovod/gorovod

go 1.26

require (
	github.com/cpmech/gosl v1.2.12
	github.com/urfave/cli/v2 v2.27.7
	github.com/valyala/gorpc v0.0.0-20160519171614-908281bef774
	go.uber.org/goleak v1.3.0
	gonum.org/v1/gonum v0.17.0
	gopkg.in/yaml.v3 v3.0.1
	gorgonia.org/cu v0.9.6
)

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
)
