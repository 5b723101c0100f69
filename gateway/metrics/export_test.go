package metrics

// OwnHelp is the help table of the families this package writes itself,
// for the page-wide tests.
var OwnHelp = help
