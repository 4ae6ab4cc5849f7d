package hvd

// SetMetricsRank gives c the number under which its metrics go to gorun,
// as GOROVOD_METRICS_RANK does in ElasticConfigFromEnv.
func SetMetricsRank(c *ElasticConfig, rank int) { c.metricsRank = rank + 1 }

// MetricsRankOf is that number; -1 without one.
func MetricsRankOf(c ElasticConfig) int { return c.metricsRank - 1 }
