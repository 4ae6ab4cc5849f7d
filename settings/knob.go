package settings

// This file describes an entry of Table, the one table of the knobs:
// everything that names a field of Knobs outside this package (gorun's
// flags, its config file, --help, the man page, completion, the GOROVOD_
// variables of the ranks) reads it from Table.

// Categories of the knobs in gorun's help.
const (
	CategoryJob    = "job"
	CategoryTuning = "tuning (passed to every rank)"
)

// Value is a knob's value as text: String formats it and Set parses it
// into the field it stands for. flag.Value and cli.Generic have this shape.
type Value interface {
	String() string
	Set(s string) error
}

// Checker is a Value that reports, once the command line is read, a value
// that parsed but is out of range: Check's message follows "--flag " ("0:
// want a positive number of milliseconds").
type Checker interface {
	Check() error
}

// Kind says how gorun's flag takes a knob's value.
type Kind uint8

// The kinds of knob.
const (
	KindText   Kind = iota // a word or a path: --help quotes its default
	KindNumber             // a number or a duration
	KindBool               // set or not: the flag takes no value
)

// Knob describes one field of Knobs for every place that names it.
type Knob struct {
	Flag      string   // gorun's flag, and the key of its config file
	Aliases   []string // other names of the flag
	Var       string   // the GOROVOD_ variable that carries it to the ranks
	VarNote   string   // said after the variable in --help where its unit differs from the flag's (", in bytes")
	Category  string   // CategoryTuning or CategoryJob
	Usage     string   // gorun's help text (the variable is appended)
	Choices   []string // the words it takes, if a fixed set (completion offers them)
	TakesFile bool     // its value is a file name
	Kind      Kind

	// Env returns the knob in k as its variable spells it.
	Env func(k *Knobs) Value
	// FlagValue returns it as gorun's flag spells it (MiB, milliseconds, a
	// duration or seconds); nil for KindBool.
	FlagValue func(k *Knobs) Value
	// Bool returns the field of a KindBool knob.
	Bool func(k *Knobs) *bool
}

// HelpCategory returns k's category: CategoryTuning unless it names another.
func (k Knob) HelpCategory() string {
	if k.Category == "" {
		return CategoryTuning
	}
	return k.Category
}

// FlagText returns the knob in knobs as gorun's flag spells it:
// FlagValue, else Env (nil for KindBool, whose flag sets Bool).
func (k Knob) FlagText(knobs *Knobs) Value {
	switch {
	case k.Kind == KindBool:
		return nil
	case k.FlagValue != nil:
		return k.FlagValue(knobs)
	}
	return k.Env(knobs)
}
