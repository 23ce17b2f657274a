package api

// ReconcileRequest is the body of POST /v1/scopes/reconcile: the Work the
// active configuration generation leaves behind, in one scope or all.
type ReconcileRequest struct {
	// Scope limits it to one scope (also one the generation removed).
	Scope string `json:"scope,omitempty"`
	// DryRun lists the Work and what would be done, changing nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// Reconciled is the answer of a scope reconcile.
type Reconciled struct {
	Generation int64           `json:"generation"`
	DryRun     bool            `json:"dry_run"`
	Items      []ReconcileItem `json:"items"`
}

// What a scope reconcile finds wrong with a Work, as
// ReconcileItem.Problem names it.
const (
	ProblemScopeRemoved   = "scope_removed"
	ProblemScopeInactive  = "scope_inactive"
	ProblemBindingRemoved = "binding_removed"
)

// How a scope reconcile settles a Work, as ReconcileItem.Action names it.
const (
	ReconcileCancel = "cancel"
	ReconcileHold   = "hold"
)

// ReconcileItem is one Work left behind and how it is (or, in a dry run,
// would be) settled.
type ReconcileItem struct {
	Work    string `json:"work"`
	Scope   string `json:"scope"`
	Binding string `json:"binding"`
	// State is the Work's state when it was found.
	State   string `json:"state"`
	Problem string `json:"problem"`
	Action  string `json:"action"`
	Detail  string `json:"detail"`
	// Keys are the keys the Work owns.
	Keys []string `json:"keys"`
	// Event is the core.scope.reconciled event that settled it (omitted
	// in a dry run).
	Event string `json:"event,omitempty"`
	// Existing: an earlier request with the same Idempotency-Key settled
	// it; nothing was done again.
	Existing bool `json:"existing,omitzero"`
	// Result is the Work as the reconcile left it (omitted in a dry run).
	Result *Work `json:"result,omitempty"`
}
