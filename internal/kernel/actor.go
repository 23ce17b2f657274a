package kernel

import "context"

type actorKey struct{}

// WithActor returns a context carrying the principal who acts
// (operator:<name>). Control stamps it on the events it accepts.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the principal WithActor put on ctx ("" for none).
func ActorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}
