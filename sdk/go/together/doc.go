// Together AI GPU clusters with preemptible capacity, as code.
package together
