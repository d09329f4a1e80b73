package outboxgorm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/core/outboxsql"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/go-outbox/outbox/adapters/gorm"
)

// Account is an aggregate root: a GORM model that embeds a Recorder (not
// a column) and raises domain events while it changes.
type Account struct {
	outbox.Recorder `gorm:"-"`
	ID              string `gorm:"primaryKey;size:32"`
	Balance         int
}

// AggregateRef names the aggregate the events belong to.
func (a *Account) AggregateRef() (outbox.AggregateType, string) {
	return outbox.AggregateName("Account"), a.ID
}

// Deposit changes the account and records what happened.
func (a *Account) Deposit(amount int) {
	a.Balance += amount
	a.Raise(MoneyDeposited{AccountID: a.ID, Amount: amount})
}

// MoneyDeposited is a domain event, named by its EventType method.
type MoneyDeposited struct {
	AccountID string `json:"accountId"`
	Amount    int    `json:"amount"`
}

// EventType returns the stored event type.
func (MoneyDeposited) EventType() string { return "MoneyDeposited" }

// AccountRepo is the repository: it loads and saves accounts with the
// GORM handle it is given (the transaction's).
type AccountRepo struct{}

// Get loads an account.
func (AccountRepo) Get(tx *gorm.DB, id string) (*Account, error) {
	var a Account
	return &a, tx.First(&a, "id = ?", id).Error
}

// Save stores an account.
func (AccountRepo) Save(tx *gorm.DB, a *Account) error { return tx.Save(a).Error }

// AccountService is the application layer: one use case, one transaction.
type AccountService struct {
	db     *gorm.DB
	repo   AccountRepo
	outbox *outbox.Client
}

// Deposit loads the account, changes it, saves it and writes the events it
// raised — all in one GORM transaction, which ctx carries to the outbox.
func (s AccountService) Deposit(ctx context.Context, id string, amount int) error {
	return outboxgorm.Transaction(ctx, s.db, func(ctx context.Context, tx *gorm.DB) error {
		acc, err := s.repo.Get(tx, id)
		if err != nil {
			return err
		}
		acc.Deposit(amount)
		if err := s.repo.Save(tx, acc); err != nil {
			return err
		}
		_, err = s.outbox.WriteFrom(ctx, acc)
		return err
	})
}

// The domain-event flow with GORM: service → repository → outbox, in one
// transaction.
func Example_domainEvents() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outboxgorm")
	defer os.RemoveAll(dir)
	db, _ := gorm.Open(sqlite.Dialector{DriverName: "sqlite", DSN: outboxsql.SQLiteDSN(filepath.Join(dir, "app.db"))},
		&gorm.Config{Logger: logger.Discard})
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close() // after client.Close
	}
	_ = db.AutoMigrate(&Account{})
	_ = db.Create(&Account{ID: "a-1", Balance: 10}).Error

	tc, _ := outboxgorm.New(db)
	store, _ := outboxgorm.Open(db)
	_ = store.Migrate(ctx)
	client, _ := outbox.New(outbox.Config{Store: store, TxContext: tc})
	delivered := make(chan string, 1)
	_ = client.Handle(outbox.EventName("MoneyDeposited"), func(_ context.Context, e outbox.Envelope) error {
		delivered <- e.AggregateID() + " " + e.PayloadString()
		return nil
	})
	_ = client.Start(ctx)
	defer client.Close(ctx)

	svc := AccountService{db: db, outbox: client}
	if err := svc.Deposit(ctx, "a-1", 5); err != nil {
		fmt.Println(err)
		return
	}
	var acc Account
	_ = db.First(&acc, "id = ?", "a-1").Error
	fmt.Println("balance:", acc.Balance)
	fmt.Println("delivered:", <-delivered)
	// Output:
	// balance: 15
	// delivered: a-1 {"accountId":"a-1","amount":5}
}
