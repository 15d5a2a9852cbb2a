package webhooks

import "time"

// Event is what one POST carries, marshalled as {"type", "id", "created_at", "data"}.
type Event struct {
	// Type names the event (TypeBudgetThreshold); it is also sent as X-Switchyard-Event.
	Type string `json:"type"`
	// ID identifies the event; Send makes one up when it is empty. One event sent to two
	// endpoints keeps its ID at both (each POST has its own delivery id).
	ID string `json:"id"`
	// At is when the event happened; Send fills in the clock's now when it is zero.
	At time.Time `json:"created_at"`
	// Data is the event's payload (BudgetCrossed for TypeBudgetThreshold).
	Data any `json:"data"`
}

// TypeBudgetThreshold is the type of an event whose data is BudgetCrossed.
const TypeBudgetThreshold = "key.budget_threshold"

// Budgets a BudgetCrossed names.
const (
	BudgetDaily   = "daily"
	BudgetMonthly = "monthly"
)

// BudgetCrossed is a client key's spend crossing a share of one of its budgets in the current
// period: sent once per threshold (80 and 100 percent) and period.
type BudgetCrossed struct {
	KeyID   int64  `json:"key_id"`
	KeyName string `json:"key_name"`
	// Budget is BudgetDaily or BudgetMonthly.
	Budget string `json:"budget"`
	// Threshold is the share crossed, in percent: 80 or 100.
	Threshold int `json:"threshold_percent"`
	// SpendUSD is the key's spend in the period when it crossed; BudgetUSD the budget.
	SpendUSD  float64 `json:"spend_usd"`
	BudgetUSD float64 `json:"budget_usd"`
	// PeriodStart and ResetsAt bound the calendar day or month in TimeZone.
	PeriodStart time.Time `json:"period_start"`
	ResetsAt    time.Time `json:"resets_at"`
	// TimeZone is the IANA name of the zone the periods follow ("UTC" by default).
	TimeZone string `json:"time_zone"`
}

// NewBudgetEvent is the event for a crossed budget threshold; Send fills in its ID and time.
func NewBudgetEvent(data BudgetCrossed) Event {
	return Event{Type: TypeBudgetThreshold, Data: data}
}
